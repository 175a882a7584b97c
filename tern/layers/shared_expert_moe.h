// SharedExpertMoe: the Qwen3.5-MoE feed-forward — a top-k routed SparseMoe (weights always renormalised)
// plus one always-on SwiGLU shared expert scaled by sigmoid(shared_expert_gate(x)).
#pragma once
#include "tern/layers/mlp.h"
#include "tern/layers/moe.h"

namespace tern {

class SharedExpertMoe {
 public:
  // Loads the routed experts as SparseMoe::load does, prefix.shared_expert.{gate,up,down}_proj of
  // shared_inter, and prefix.shared_expert_gate.weight [1, hidden]. Throws the loaders' errors.
  static SharedExpertMoe load(const WeightLoader& w, const SparseMoeShape& routed, int64_t shared_inter);
  // x [..., hidden] -> [..., hidden]: routed(x) + sigmoid(gate(x)) * shared(x).
  Tensor forward(const Tensor& x) const;

 private:
  SparseMoe routed_;
  GatedMlp shared_;
  Linear shared_gate_;  // [1, hidden]
};

}  // namespace tern
