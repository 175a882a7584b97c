// SparseMoe: a top-k routed mixture of SwiGLU experts (Qwen3-MoE), and the router's
// softmax -> top-k -> renormalise rule on its own so tests can check it against a plain loop.
#pragma once
#include <vector>

#include "tern/layers/linear.h"

namespace tern {

// The experts each token goes to and the weights its outputs are mixed with.
struct RouterChoice {
  Tensor weights;  // [T, k] f32
  Tensor experts;  // [T, k] i32, sorted by descending probability (ties: lower expert first)
};

// logits [T, n_expert] (any float dtype) -> the k most probable experts of each row under a softmax
// taken in f32 over all experts; with renormalize the k weights are rescaled to sum to 1.
// Throws "[moe] expected ..." for a logits tensor that is not 2-D or k outside [1, n_expert].
RouterChoice route_top_k(const Tensor& logits, int64_t k, bool renormalize);

// One expert's gated MLP weights.
struct ExpertWeights {
  Tensor gate, up;  // [inter, hidden]
  Tensor down;      // [hidden, inter]
};

enum class ExpertActivation { swiglu, geglu_tanh };

// x [T, hidden] (contiguous, CPU) -> [T, hidden] f32: for each token the sum over its chosen experts of
// weight * down(act(gate(x)) * up(x)). Tokens are bucketed by expert, so each expert runs once on
// its rows. route.experts must index `experts`.
Tensor mix_experts(const Tensor& x, const RouterChoice& route, const std::vector<ExpertWeights>& experts,
                   ExpertActivation act);

struct SparseMoeShape {
  int64_t hidden = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top-k
  int64_t expert_inter = 0;   // moe_intermediate_size
  bool norm_topk_prob = true;
};

class SparseMoe {
 public:
  // Loads prefix.gate.weight [n_expert, hidden] and the experts, either one tensor set per expert
  // (prefix.experts.E.{gate,up,down}_proj.weight) or fused over experts
  // (prefix.experts.gate_up_proj [n_expert, 2*inter, hidden], prefix.experts.down_proj [n_expert, hidden, inter]).
  // Throws the loader's missing-tensor / shape errors.
  static SparseMoe load(const WeightLoader& w, const SparseMoeShape& shape);
  // x [..., hidden] -> [..., hidden]: sum over the chosen experts of weight * expert(x).
  // CPU tensors only for now; a CUDA tensor throws "[moe] expected ...".
  Tensor forward(const Tensor& x) const;

  const SparseMoeShape& shape() const { return shape_; }

 private:
  SparseMoeShape shape_;
  Linear router_;  // [n_expert, hidden]
  std::vector<ExpertWeights> experts_;
};

}  // namespace tern
