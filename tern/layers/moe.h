// SparseMoe: a top-k routed mixture of SwiGLU experts (Qwen3-MoE), the router's softmax -> top-k ->
// renormalise rule on its own so tests can check it against a plain loop, and the stacked expert weights.
#pragma once
#include "tern/layers/linear.h"

namespace tern {

// The experts each token goes to and the weights its outputs are mixed with.
struct RouterChoice {
  Tensor weights;  // [T, k] f32
  Tensor experts;  // [T, k] i32, sorted by descending probability (ties: lower expert first)
};

// logits [T, n_expert] (any float dtype) -> the k most probable experts of each row under a softmax
// taken in f32 over all experts; with renormalize the k weights are rescaled to sum to 1. Runs on the
// logits' device (no host sync on the GPU). expert_bytes, the bytes of one expert's weights, goes to a
// recording RouterTape with the choice.
// Throws "[moe] expected ..." for a logits tensor that is not 2-D or k outside [1, n_expert].
RouterChoice route_top_k(const Tensor& logits, int64_t k, bool renormalize, int64_t expert_bytes = 0);

// One layer's routed experts stacked over experts on the compute device, as ops::moe_experts takes them.
struct StackedExperts {
  Tensor gate_up;  // [n_expert, 2*inter, hidden]: gate rows, then up rows
  Tensor down;     // [n_expert, hidden, inter]

  // Loads prefix.experts.gate_up_proj [E, 2*inter, hidden] and prefix.experts.down_proj [E, hidden, inter]
  // when the checkpoint fuses them, else stacks prefix.experts.N.{gate,up,down}_proj.weight (a copy).
  // Throws the loader's missing-tensor / shape errors.
  static StackedExperts load(const WeightLoader& w, int64_t n_expert, int64_t hidden, int64_t inter);
  // The bytes of one expert's gate, up and down weights.
  int64_t expert_bytes() const { return static_cast<int64_t>(gate_up.nbytes() + down.nbytes()) / gate_up.size(0); }
};

struct SparseMoeShape {
  int64_t hidden = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top-k
  int64_t expert_inter = 0;   // moe_intermediate_size
  bool norm_topk_prob = true;
  // One expert's parameters: its gate, up and down matrices.
  int64_t expert_params() const { return 3 * hidden * expert_inter; }
};

class SparseMoe {
 public:
  // Loads prefix.gate.weight [n_expert, hidden] and the experts, either one tensor set per expert
  // (prefix.experts.E.{gate,up,down}_proj.weight) or fused over experts
  // (prefix.experts.gate_up_proj [n_expert, 2*inter, hidden], prefix.experts.down_proj [n_expert, hidden, inter]).
  // Throws the loader's missing-tensor / shape errors.
  static SparseMoe load(const WeightLoader& w, const SparseMoeShape& shape);
  // x [..., hidden] -> [..., hidden] in x's dtype: sum over the chosen experts of weight * expert(x).
  Tensor forward(const Tensor& x) const;
  // The same over ops::pre_norm(in), whose residual sum goes to sum (as GatedMlp's). Without an active
  // RouterTape the norm and the routing are ops::moe_norm_route (one kernel for a CUDA decode step).
  Tensor forward(const ops::PreNorm& in, Tensor& sum) const;

  const SparseMoeShape& shape() const { return shape_; }

 private:
  // The experts' mix of x2d [T, hidden] under `route`, in x2d's dtype.
  Tensor mix(const Tensor& x2d, const RouterChoice& route) const;

  SparseMoeShape shape_;
  Linear router_;  // [n_expert, hidden]
  StackedExperts experts_;
};

}  // namespace tern
