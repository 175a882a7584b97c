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

// `in` as the one-kernel CUDA path takes it when it folds it into a product with w [N, K]
// (moe_norm_route): x2d and delta2d [rows, K] contiguous (delta2d undefined without a delta), the norm
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

// {sum, linear(normed, w, bias)} with {sum, normed} = pre_norm(in): pre_norm, then ops::linear. (A CUDA
// kernel that put the norm into the product measured slower in whole decode steps than the two
// launches, bench/RESULTS.md 2026-12-03, and was removed; so did one whose warps normed the row from
// registers behind their weight loads, 2026-12-05. A lab, bench/cuda/norm_fold_lab.cu, measured the norm
// folded into the next product behind per-block partial sums, or written by the producer's last block,
// both slower than the one-block norm launch, 2026-12-06.)
NormedProduct norm_linear(const PreNorm& in, const Tensor& w, const Tensor& bias = Tensor());

// {sum, gated_linear(normed, w, act)}: the same for the gated MLP's stacked gate/up weights.
NormedProduct norm_gated_linear(const PreNorm& in, const Tensor& w, UnaryOp act);

}  // namespace tern::ops
