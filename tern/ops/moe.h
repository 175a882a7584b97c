// Mixture-of-experts op: the routed experts' gated MLPs over stacked per-layer expert weights, each
// token mixing its chosen experts' outputs by its routing weights.
#pragma once
#include "tern/core/tensor.h"
#include "tern/ops/norm_linear.h"

namespace tern::ops {

enum class MoeActivation { swiglu, geglu_tanh };  // silu(g) * u, gelu_tanh(g) * u

// x [T, hidden] (f32 or bf16), experts [T, k] i32, weights [T, k] f32, gate_up [E, 2*inter, hidden]
// (gate rows first, then up rows: the fused checkpoint layout), down [E, hidden, inter]; all on one
// device -> [T, hidden] of out_dtype (f32 or bf16; the f32 sums rounded once): out[t] = sum_j weights[t, j] *
// down_e(act(gate_e(x_t)) * up_e(x_t)), e = experts[t, j]. A token's experts must be distinct. Throws "[moe_experts]
// expected ..." on shape, dtype or device mismatches, and on the CPU on an expert id outside [0, E); on the GPU ids are
// not read back (that would cost a sync) and an out-of-range id contributes nothing.
Tensor moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, MoeActivation act, Dtype out_dtype = Dtype::f32);

// The router's choice from logits [T, E] f32: probabilities softmax(logits) over the experts, the k
// largest (ties: lower index first) as experts [T, k] i32 with their probabilities as weights [T, k] f32,
// divided by their sum when renormalize. The same numbers as ops::softmax, ops::topk and the division;
// one kernel on CUDA for E <= 1024 (a warp per token). Throws "[moe_route] expected ..." on bad shapes.
struct MoeRoute {
  Tensor weights, experts;
};
MoeRoute moe_route(const Tensor& logits, int64_t k, bool renormalize);

// A mixture-of-experts sub-layer's entry: {sum, normed} = pre_norm(in), then moe_route of the router's
// logits linear(normed, router) in f32. The same numbers as those three ops; on CUDA up to 4 bf16 rows
// (E <= 256, k <= 32) are one kernel. router [E, hidden]. Throws the three ops' errors.
struct MoeNormRoute {
  Tensor sum, normed, weights, experts;
};
MoeNormRoute moe_norm_route(const PreNorm& in, const Tensor& router, int64_t k, bool renormalize);

}  // namespace tern::ops

// Backend entry points. Inputs are validated by ops/ (x, experts, weights contiguous); out [T, hidden]
// is allocated: f32 and zero-filled on the CPU; on CUDA f32 or bf16, every element written there.
namespace tern::cpu {
void moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, ops::MoeActivation act, Tensor& out);
}  // namespace tern::cpu
namespace tern::cuda {
void moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, ops::MoeActivation act, Tensor& out);
// logits contiguous [T, E] f32, E <= 1024, 1 <= k <= min(E, 32); weights / experts allocated [T, k].
void moe_route(const Tensor& logits, int64_t k, bool renormalize, Tensor& weights, Tensor& experts);
// The one-kernel ops::moe_norm_route: x2d, delta2d (may be undefined) [M, H] bf16 contiguous, weight
// [H] bf16 (may be undefined), router [E, H] bf16 contiguous. False (nothing done) where it does not apply.
bool moe_norm_route(const Tensor& x2d, const Tensor& delta2d, const Tensor& weight, float eps, const Tensor& router,
                    int64_t k, bool renormalize, ops::MoeNormRoute& r);
}  // namespace tern::cuda
