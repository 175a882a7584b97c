// CPU-only build: the CUDA side of ops::norm_rope.
#include "tern/ops/norm_rope.h"

namespace tern::cuda {
void norm_rope(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const Tensor&, const ops::RopeTable&,
               Tensor&, Tensor&) {
  TERN_THROW("[norm_rope] needs a CUDA build");
}
}  // namespace tern::cuda
