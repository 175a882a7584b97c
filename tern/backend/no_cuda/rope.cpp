// CPU-only build: the CUDA rotary-embedding entry points throw.
#include "tern/ops/rope.h"

namespace tern::cuda {

void rope(const Tensor&, const Tensor&, const ops::RopeTable&, Tensor&) { TERN_THROW("[rope] needs a CUDA build"); }

}  // namespace tern::cuda
