// GatedMlp.
#include "tern/layers/mlp.h"

#include "tern/ops/elementwise.h"
#include "tern/ops/gated_linear.h"

namespace tern {

GatedMlp GatedMlp::load(const WeightLoader& w, int64_t hidden, int64_t inter, Act act, bool bias) {
  GatedMlp m;
  m.gate_up_ = StackedLinear::make(
      {Linear::load(w, "gate_proj", hidden, inter, bias), Linear::load(w, "up_proj", hidden, inter, bias)},
      w.device().is_cuda());
  m.down_ = Linear::load(w, "down_proj", inter, hidden, bias);
  m.act_ = act;
  return m;
}

Tensor GatedMlp::forward(const Tensor& x) const {
  if (gate_up_.stacked.weight.defined() && !gate_up_.stacked.bias.defined())  // one product and activation
    return down_.forward(ops::gated_linear(x, gate_up_.stacked.weight,
                                           act_ == Act::silu ? ops::UnaryOp::silu : ops::UnaryOp::gelu_tanh));
  std::vector<Tensor> gu = gate_up_.forward(x);
  const Tensor &g = gu[0], &u = gu[1];
  Tensor h = act_ == Act::silu ? ops::swiglu(g, u) : ops::geglu(g, u, true);
  return down_.forward(h);
}

Tensor GatedMlp::forward(const ops::PreNorm& in, Tensor& sum) const {
  if (gate_up_.stacked.weight.defined() && !gate_up_.stacked.bias.defined()) {
    ops::NormedProduct r = ops::norm_gated_linear(in, gate_up_.stacked.weight,
                                                  act_ == Act::silu ? ops::UnaryOp::silu : ops::UnaryOp::gelu_tanh);
    sum = r.sum;
    return down_.forward(r.out);
  }
  ops::AddNorm a = ops::pre_norm(in);
  sum = a.sum;
  return forward(a.normed);
}

GatedMlp::Act mlp_act_from_name(const std::string& name) {
  if (name == "silu" || name == "swish") return GatedMlp::Act::silu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh") return GatedMlp::Act::gelu_tanh;
  TERN_THROW("[mlp] expected hidden_act silu or gelu_pytorch_tanh, got '{}'", name);
}

}  // namespace tern
