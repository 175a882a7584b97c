// Gemma 4's mixture-of-experts block, run beside the dense MLP: a router over the scale-free RMS-normed
// residual (times a learned per-channel scale and hidden^-1/2; softmax, top-k, renormalise, times a
// learned per-expert scale) mixing GeGLU experts stored fused over experts.
#pragma once
#include "tern/layers/linear.h"
#include "tern/layers/moe.h"

namespace tern {

struct GemmaMoeShape {
  int64_t hidden = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top_k_experts
  int64_t expert_inter = 0;   // moe_intermediate_size
  float norm_eps = 1e-6f;
  // One expert's parameters: its gate, up and down matrices.
  int64_t expert_params() const { return 3 * hidden * expert_inter; }
};

class GemmaMoe {
 public:
  // Loads prefix.router.{proj.weight [n_expert, hidden], scale [hidden], per_expert_scale [n_expert]} and
  // prefix.experts.{gate_up_proj [n_expert, 2*inter, hidden], down_proj [n_expert, hidden, inter]}.
  static GemmaMoe load(const WeightLoader& w, const GemmaMoeShape& shape);
  // The router's choice for r [T, hidden]: weights [T, k] f32 (renormalised, times per_expert_scale), experts
  // [T, k]; computed in f32 whatever r's dtype.
  RouterChoice route(const Tensor& r) const;
  // r [..., hidden] routes, x [..., hidden] (same shape) feeds the experts -> [..., hidden].
  Tensor forward(const Tensor& r, const Tensor& x) const;

 private:
  GemmaMoeShape shape_;
  Linear proj_;            // [n_expert, hidden] f32
  Tensor scale_;           // [hidden] f32
  Tensor per_expert_scale_;  // [n_expert, 1] f32: a table the chosen expert ids gather from
  StackedExperts experts_;
};

}  // namespace tern
