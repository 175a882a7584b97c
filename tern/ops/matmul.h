// Matrix products: batched matmul with transposes and broadcast batch dims, and linear (x @ W^T).
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

// a [..., M, K] (or [..., K, M] with trans_a) times b [..., K, N] (or [..., N, K] with trans_b)
// -> [..., M, N]; batch dims broadcast; a and b share a float dtype. f32 accumulation.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// x [..., in] @ w[out, in]^T (+ bias [out]) -> [..., out] in x's dtype. w may be f32 or bf16 while
// x is f32 (bf16 weights widen per block on CPU). Throws "[linear] expected ..." on shape mismatch.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});
// The same with the output in out_dtype, x's dtype or f32 (an f32 product of bf16 activations, e.g. MoE
// router logits, without rounding it to bf16 or widening the activations first).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, Dtype out_dtype);

}  // namespace tern::ops

namespace tern::cpu {
void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out);
void linear(const Tensor& x2d, const Tensor& w, const Tensor& bias, Tensor& out2d);  // x2d [T, in] contiguous
}  // namespace tern::cpu
namespace tern::cuda {
void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out);
void linear(const Tensor& x2d, const Tensor& w, const Tensor& bias, Tensor& out2d);
}  // namespace tern::cuda
