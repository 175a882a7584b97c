// GemmaMoe: the scaled router and the GeGLU expert mix (ops::moe_experts on the stacked experts).
#include "tern/layers/gemma_moe.h"

#include <cmath>
#include <string>

#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/moe.h"
#include "tern/ops/norm.h"

namespace tern {

GemmaMoe GemmaMoe::load(const WeightLoader& w, const GemmaMoeShape& shape) {
  const int64_t E = shape.n_expert, H = shape.hidden, I = shape.expert_inter;
  TERN_CHECK(E >= 1 && shape.n_expert_used >= 1 && shape.n_expert_used <= E,
             "[moe] expected 1 <= top_k_experts <= num_experts, got {} of {}", shape.n_expert_used, E);
  TERN_CHECK(H >= 1 && I >= 1, "[moe] expected positive hidden and moe_intermediate_size, got {} and {}", H, I);
  GemmaMoe m;
  m.shape_ = shape;
  m.proj_ = Linear::load(w, "router.proj", H, E, false);
  // An f32 router matrix (n_expert x hidden, small): a bf16 one would round the f32 router input on GPUs,
  // where a product takes one input type.
  if (m.proj_.weight.dtype() != Dtype::f32) m.proj_.weight = ops::cast(m.proj_.weight, Dtype::f32);
  Tensor scale = w.get("router.scale", {H});
  m.scale_ = scale.dtype() == Dtype::f32 ? scale : ops::cast(scale, Dtype::f32);
  Tensor pes = w.get("router.per_expert_scale", {E});
  m.per_expert_scale_ = (pes.dtype() == Dtype::f32 ? pes : ops::cast(pes, Dtype::f32)).reshape({E, 1}).contiguous();
  // gate is the first half of gate_up, as chunk(2) splits it: the layout ops::moe_experts takes
  m.experts_ = StackedExperts{w.get_matrix("experts.gate_up_proj", {E, 2 * I, H}), w.get_matrix("experts.down_proj", {E, H, I})};
  return m;
}

RouterChoice GemmaMoe::route(const Tensor& r) const {
  // The router in f32 even for bf16 activations: bf16 logits would flip near-tied experts.
  Tensor h = ops::rms_norm(r.dtype() == Dtype::f32 ? r : ops::cast(r, Dtype::f32), Tensor(), shape_.norm_eps);
  h = ops::scale(ops::mul(h, scale_), static_cast<float>(std::pow(static_cast<double>(shape_.hidden), -0.5)));
  RouterChoice c = route_top_k(proj_.forward(h), shape_.n_expert_used, true, experts_.expert_bytes());
  Tensor scale = ops::embedding(per_expert_scale_, c.experts, Dtype::f32);  // [T, k, 1]
  c.weights = ops::mul(c.weights, scale.view(c.weights.shape()));
  return c;
}

Tensor GemmaMoe::forward(const Tensor& r, const Tensor& x) const {
  const int64_t H = shape_.hidden;
  TERN_CHECK(x.defined() && r.defined() && x.rank() >= 1 && x.size(-1) == H && r.shape() == x.shape(),
             "[moe] expected router input and expert input of one shape [..., {}], got {} and {}", H,
             r.defined() ? shape_str(r.shape()) : std::string("undefined"),
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t T = x.numel() / H;
  Tensor x2 = x.reshape({T, H}).contiguous();  // [T, hidden]
  RouterChoice route_choice = route(r.reshape({T, H}).contiguous());

  Tensor out = ops::moe_experts(x2, route_choice.experts, route_choice.weights, experts_.gate_up, experts_.down,
                                ops::MoeActivation::geglu_tanh);  // [T, hidden] f32
  if (x.dtype() != Dtype::f32) out = ops::cast(out, x.dtype());
  return out.view(x.shape());
}

}  // namespace tern
