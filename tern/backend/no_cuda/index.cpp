// CPU-only build: the CUDA indexing entry points throw.
#include "tern/ops/index.h"

namespace tern::cuda {

void embedding(const Tensor&, const Tensor&, Tensor&) { TERN_THROW("[embedding] needs a CUDA build"); }

}  // namespace tern::cuda
