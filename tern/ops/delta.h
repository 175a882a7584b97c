// Gated DeltaNet ops (Qwen3.5 linear attention): L2 normalisation over the last dim, the depthwise
// causal conv1d with carried history, and the gated delta rule (recurrent step and chunked WY form).
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

// x * rsqrt(sum(x^2, -1) + eps) over the last dim, f32 math. [.., D] -> [.., D] in x's dtype.
Tensor l2norm(const Tensor& x, float eps);

// Depthwise causal conv1d over time, continuing from `history`, the K-1 inputs before x (zeros at the
// start of a sequence): out[b, t, c] = sum_j weight[c, j] * xx[b, t + j, c] with xx = cat(history, x)
// along time. x [B, L, C] f32, weight [C, K] f32, history [B, K-1, C] f32 contiguous, updated in place to
// the last K-1 rows of xx. Returns out [B, L, C] f32 (no activation). Throws "[causal_conv1d] expected ..."
// on a shape or dtype mismatch.
Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history);

enum class DeltaRuleAlgo { recurrent, chunked };

// The gated delta rule over L steps, per batch row b and value head h (key head h / (Hv / Hk), as
// repeat_interleave pairs them), on the state S [Dk, Dv]:
//   S <- exp(g_t) S;  S <- S + k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t.
// q, k [B, L, Hk, Dk], v [B, L, Hv, Dv], g, beta [B, L, Hv], all f32 (q and k as given: normalise and
// scale them first). state [B, Hv, Dk, Dv] f32 contiguous, read as the initial state and updated in
// place to the final one. recurrent steps token by token; chunked runs the WY / UT-transform form over
// chunks of `chunk` positions (same result up to rounding). Returns o [B, L, Hv, Dv] f32.
// Throws "[gated_delta_rule] expected ..." on a shape or dtype mismatch.
Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, DeltaRuleAlgo algo, int64_t chunk = 64);

}  // namespace tern::ops

// Backend entry points. Inputs are validated (and made contiguous) by ops/; out is allocated.
namespace tern::cpu {
void l2norm(const Tensor& x, float eps, Tensor& out);
void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history, Tensor& out);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      Tensor& state, ops::DeltaRuleAlgo algo, int64_t chunk, Tensor& out);
}  // namespace tern::cpu
namespace tern::cuda {
void l2norm(const Tensor& x, float eps, Tensor& out);
void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history, Tensor& out);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      Tensor& state, ops::DeltaRuleAlgo algo, int64_t chunk, Tensor& out);
}  // namespace tern::cuda
