// A pre-norm sub-layer's entry as one op: the residual add, the RMSNorm and the product that consumes it
// (a decoder's q/k/v projection, or its gated MLP's gate/up product).
#pragma once
#include "tern/core/tensor.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/norm.h"

namespace tern::ops {

// rms_norm(x + delta, weight, eps), delta optional (undefined: rms_norm(x)).
struct PreNorm {
  Tensor x, delta, weight;
  float eps = 1e-6f;
};

// {x + delta (x itself without a delta), rms_norm of it}: ops::add_rms_norm or ops::rms_norm.
AddNorm pre_norm(const PreNorm& in);

// `in` as the one-kernel CUDA paths take it when they fold it into a product with w [N, K] (norm_linear,
// moe_norm_route): x2d and delta2d [rows, K] contiguous (delta2d undefined without a delta), the norm
// weight contiguous (or undefined). rows is 0 unless x is bf16 with at most 4 rows on the CUDA device of
// a contiguous bf16 w, and the delta and norm weight match it; the caller then takes the unfused ops,
// which check and say what is wrong.
struct DecodeRows {
  Tensor x2d, delta2d, weight;
  int64_t rows = 0;
};
DecodeRows decode_rows(const PreNorm& in, const Tensor& w);

// The residual sum (x itself without a delta) and the product of its norm.
struct NormedProduct {
  Tensor sum, out;
};

// {sum, linear(normed, w, bias)} with {sum, normed} = pre_norm(in): the same numbers as pre_norm then
// ops::linear. On CUDA a decode-sized bf16 input (<= 4 rows, no bias) is one kernel: every block
// recomputes the norm of the few rows into shared memory and streams its share of w against it.
NormedProduct norm_linear(const PreNorm& in, const Tensor& w, const Tensor& bias = Tensor());

// {sum, gated_linear(normed, w, act)}: the same for the gated MLP's stacked gate/up weights.
NormedProduct norm_gated_linear(const PreNorm& in, const Tensor& w, UnaryOp act);

}  // namespace tern::ops

namespace tern::cuda {
// The one-kernel paths; false (nothing done) where they do not apply. x2d, delta2d [rows, in]
// contiguous (delta2d may be undefined), sum2d and out2d contiguous outputs (sum2d written only with a
// delta). act < 0: the plain product; else a UnaryOp for the gated one.
bool norm_linear(const Tensor& x2d, const Tensor& delta2d, const Tensor& weight, float eps, const Tensor& w, int act,
                 Tensor& sum2d, Tensor& out2d);
}  // namespace tern::cuda
