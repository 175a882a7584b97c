// CPU-only build: the CUDA normalisation entry points throw.
#include "tern/ops/norm.h"

namespace tern::cuda {

void rms_norm(const Tensor&, const Tensor&, float, Tensor&) { TERN_THROW("[rms_norm] needs a CUDA build"); }
void add_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&, Tensor&) {
  TERN_THROW("[add_rms_norm] needs a CUDA build");
}

}  // namespace tern::cuda
