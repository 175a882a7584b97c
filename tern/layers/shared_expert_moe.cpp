// SharedExpertMoe.
#include "tern/layers/shared_expert_moe.h"

#include "tern/ops/elementwise.h"

namespace tern {

SharedExpertMoe SharedExpertMoe::load(const WeightLoader& w, const SparseMoeShape& routed, int64_t shared_inter) {
  TERN_CHECK(shared_inter > 0, "[moe] expected shared_expert_intermediate_size > 0, got {}", shared_inter);
  SharedExpertMoe m;
  m.routed_ = SparseMoe::load(w, routed);
  m.shared_ = GatedMlp::load(w.sub("shared_expert."), routed.hidden, shared_inter, GatedMlp::Act::silu, false);
  m.shared_gate_ = Linear::load(w, "shared_expert_gate", routed.hidden, 1, false);
  return m;
}

Tensor SharedExpertMoe::forward(const Tensor& x) const {
  Tensor out = routed_.forward(x);
  Tensor shared = ops::mul(ops::sigmoid(shared_gate_.forward(x)), shared_.forward(x));  // gate [..., 1] broadcasts
  ops::binary_(out, shared, ops::BinaryOp::add);
  return out;
}

}  // namespace tern
