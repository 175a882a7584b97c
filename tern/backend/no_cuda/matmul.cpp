// CPU-only builds: the CUDA matrix products throw.
#include "tern/ops/matmul.h"

#include "tern/ops/gated_linear.h"

namespace tern::cuda {

void matmul(const Tensor&, const Tensor&, bool, bool, Tensor&) { throw Error("[matmul] needs a CUDA build"); }
void linear(const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Error("[linear] needs a CUDA build"); }
bool gated_linear(const Tensor&, const Tensor&, ops::UnaryOp, Tensor&) {
  throw Error("[gated_linear] needs a CUDA build");
}

}  // namespace tern::cuda
