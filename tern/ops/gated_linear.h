// The first half of a gated MLP as one op: the stacked gate/up product and the activation.
#pragma once
#include "tern/core/tensor.h"
#include "tern/ops/elementwise.h"

namespace tern::ops {

// x [..., in], w [2 * inter, in] (the gate rows over the up rows), act silu, gelu_tanh or gelu_erf:
// act(x W_gate^T) * (x W_up^T) [..., inter] in x's dtype -- the same numbers as ops::linear, the split
// and ops::swiglu / ops::geglu one after the other (the products rounded to x's dtype first). On CUDA a
// decode-sized bf16 product (<= 4 rows) is one kernel that never writes the products out.
Tensor gated_linear(const Tensor& x, const Tensor& w, UnaryOp act);

}  // namespace tern::ops

namespace tern::cuda {
// The one-kernel path; false (nothing done) where it does not apply. out [rows, inter] contiguous.
bool gated_linear(const Tensor& x2d, const Tensor& w, ops::UnaryOp act, Tensor& out2d);
}
