// CPU-only build: the CUDA element-wise entry points throw.
#include "tern/ops/elementwise.h"

namespace tern::cuda {

void binary(const Tensor&, const Tensor&, ops::BinaryOp, Tensor&) { TERN_THROW("[binary] needs a CUDA build"); }
void unary(const Tensor&, ops::UnaryOp, Tensor&) { TERN_THROW("[unary] needs a CUDA build"); }
void affine(const Tensor&, float, float, Tensor&) { TERN_THROW("[affine] needs a CUDA build"); }
void softcap(const Tensor&, float, Tensor&) { TERN_THROW("[softcap] needs a CUDA build"); }
void gated(const Tensor&, const Tensor&, ops::UnaryOp, Tensor&) { TERN_THROW("[gated] needs a CUDA build"); }
void cast(const Tensor&, Tensor&) { TERN_THROW("[cast] needs a CUDA build"); }

}  // namespace tern::cuda
