// CPU-only builds: the CUDA matrix products throw.
#include "tern/ops/matmul.h"

namespace tern::cuda {

void matmul(const Tensor&, const Tensor&, bool, bool, Tensor&) { throw Error("[matmul] needs a CUDA build"); }
void linear(const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Error("[linear] needs a CUDA build"); }

}  // namespace tern::cuda
