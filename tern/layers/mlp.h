// Gated MLP: down(act(gate(x)) * up(x)) with act = SiLU (SwiGLU) or tanh-GELU (GeGLU).
#pragma once
#include "tern/layers/linear.h"

namespace tern {

class GatedMlp {
 public:
  enum class Act { silu, gelu_tanh };
  // Loads prefix.{gate,up,down}_proj.
  static GatedMlp load(const WeightLoader& w, int64_t hidden, int64_t inter, Act act, bool bias);
  // x [..., hidden] -> [..., hidden]
  Tensor forward(const Tensor& x) const;
  // The same over ops::pre_norm(in) (the block's residual add and post-attention norm, fused into the
  // gate/up product where it can be); the residual sum goes to sum.
  Tensor forward(const ops::PreNorm& in, Tensor& sum) const;

 private:
  StackedLinear gate_up_;  // gate_proj, up_proj
  Linear down_;
  Act act_ = Act::silu;
};

// Maps a config's hidden_act ("silu", "gelu_pytorch_tanh", ...) to GatedMlp::Act; throws on others.
GatedMlp::Act mlp_act_from_name(const std::string& name);

}  // namespace tern
