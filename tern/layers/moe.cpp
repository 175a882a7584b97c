// SparseMoe: routing, loading either expert layout into stacked tensors, and the forward (router, then
// ops::moe_experts on the stacked experts).
#include "tern/layers/moe.h"

#include <string>
#include <vector>

#include "tern/layers/router_tape.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/matmul.h"
#include "tern/ops/moe.h"
#include "tern/ops/reduce.h"

namespace tern {

RouterChoice route_top_k(const Tensor& logits, int64_t k, bool renormalize, int64_t expert_bytes) {
  TERN_CHECK(logits.defined() && logits.rank() == 2, "[moe] expected router logits [T, n_expert], got {}",
             logits.defined() ? shape_str(logits.shape()) : std::string("an undefined tensor"));
  TERN_CHECK(k >= 1 && k <= logits.size(1), "[moe] expected top-k in [1, {}], got {}", logits.size(1), k);
  Tensor lf = logits.dtype() == Dtype::f32 ? logits : ops::cast(logits, Dtype::f32);
  RouterTape* tape = RouterTape::active();
  RouterChoice forced;
  if (tape && tape->take(ops::softmax(lf, -1), k, renormalize, forced)) return forced;
  ops::MoeRoute r = ops::moe_route(lf, k, renormalize);  // one kernel on CUDA
  if (tape) tape->put(r.experts, lf.size(1), expert_bytes);
  return {r.weights, r.experts};
}

StackedExperts StackedExperts::load(const WeightLoader& w, int64_t n_expert, int64_t hidden, int64_t inter) {
  const int64_t E = n_expert, H = hidden, I = inter;
  if (w.has("experts.gate_up_proj")) {
    return StackedExperts{w.get_matrix("experts.gate_up_proj", {E, 2 * I, H}), w.get_matrix("experts.down_proj", {E, H, I})};
  }
  // One tensor set per expert: [gate_0; up_0; gate_1; up_1; ...] along rows is the fused layout.
  std::vector<Tensor> gate_up, down;
  gate_up.reserve(static_cast<size_t>(2 * E));
  down.reserve(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    WeightLoader x = w.sub("experts." + std::to_string(e) + ".");
    gate_up.push_back(x.get_matrix("gate_proj.weight", {I, H}));
    gate_up.push_back(x.get_matrix("up_proj.weight", {I, H}));
    down.push_back(x.get_matrix("down_proj.weight", {H, I}).reshape({1, H, I}));
  }
  return StackedExperts{ops::concat(gate_up, 0).view({E, 2 * I, H}), ops::concat(down, 0)};
}

SparseMoe SparseMoe::load(const WeightLoader& w, const SparseMoeShape& shape) {
  const int64_t E = shape.n_expert, H = shape.hidden, I = shape.expert_inter;
  TERN_CHECK(E >= 1 && shape.n_expert_used >= 1 && shape.n_expert_used <= E,
             "[moe] expected 1 <= num_experts_per_tok <= num_experts, got {} of {}", shape.n_expert_used, E);
  TERN_CHECK(H >= 1 && I >= 1, "[moe] expected positive hidden and moe_intermediate_size, got {} and {}", H, I);
  SparseMoe m;
  m.shape_ = shape;
  m.router_ = Linear::load(w, "gate", H, E, false);
  m.experts_ = StackedExperts::load(w, E, H, I);
  return m;
}

Tensor SparseMoe::forward(const ops::PreNorm& in, Tensor& sum) const {
  if (!RouterTape::active() && in.x.defined() && in.x.rank() >= 1 && in.x.size(-1) == shape_.hidden) {
    ops::MoeNormRoute r = ops::moe_norm_route(in, router_.weight, shape_.n_expert_used, shape_.norm_topk_prob);
    sum = r.sum;
    const int64_t H = shape_.hidden;
    return mix(r.normed.reshape({r.normed.numel() / H, H}).contiguous(), {r.weights, r.experts}).view(in.x.shape());
  }
  ops::AddNorm a = ops::pre_norm(in);
  sum = a.sum;
  return forward(a.normed);
}

Tensor SparseMoe::forward(const Tensor& x) const {
  const int64_t H = shape_.hidden, K = shape_.n_expert_used;
  TERN_CHECK(x.defined() && x.rank() >= 1 && x.size(-1) == H, "[moe] expected x [..., {}], got {}", H,
             x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  const int64_t T = x.numel() / H;
  Tensor x2 = x.reshape({T, H}).contiguous();  // [T, hidden]
  // Router logits in f32 even for bf16 activations: rounding them to bf16 would flip near-tied experts.
  Tensor logits = ops::linear(x2, router_.weight, {}, Dtype::f32);  // [T, n_expert]
  return mix(x2, route_top_k(logits, K, shape_.norm_topk_prob, experts_.expert_bytes())).view(x.shape());
}

Tensor SparseMoe::mix(const Tensor& x2d, const RouterChoice& route) const {
  const Dtype out = x2d.dtype() == Dtype::bf16 ? Dtype::bf16 : Dtype::f32;  // the experts sum in f32
  Tensor y = ops::moe_experts(x2d, route.experts, route.weights, experts_.gate_up, experts_.down,
                              ops::MoeActivation::swiglu, out);  // [T, hidden]
  return y.dtype() == x2d.dtype() ? y : ops::cast(y, x2d.dtype());
}

}  // namespace tern
