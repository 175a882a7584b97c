// PerLayerEmbedding and PerLayerInputGate.
#include "tern/layers/per_layer_input.h"

#include <cmath>

#include "tern/ops/elementwise.h"

namespace tern {

PerLayerEmbedding PerLayerEmbedding::load(const WeightLoader& w, int64_t vocab, int64_t hidden, int64_t n_layer,
                                          int64_t dim, float eps) {
  TERN_CHECK(vocab > 0 && hidden > 0 && n_layer > 0 && dim > 0,
             "[per-layer] expected positive vocab, hidden, layers and per-layer dim, got {}, {}, {}, {}", vocab, hidden,
             n_layer, dim);
  PerLayerEmbedding p;
  p.table_ = Embedding::load(w, "embed_tokens_per_layer", vocab, n_layer * dim);
  p.projection_ = Linear::load(w, "per_layer_model_projection", hidden, n_layer * dim, false);
  p.norm_ = RMSNorm::load(w, "per_layer_projection_norm", dim, eps);
  p.hidden_ = hidden;
  p.n_layer_ = n_layer;
  p.dim_ = dim;
  return p;
}

Tensor PerLayerEmbedding::forward(const Tensor& ids, const Tensor& x) const {
  const int64_t B = ids.size(0), L = ids.size(1);
  // Scales as transformers applies them: f32 values of sqrt(dim) and hidden^-0.5.
  Tensor tokens = ops::scale(table_.forward(ids), static_cast<float>(std::sqrt(static_cast<double>(dim_))));
  Tensor proj = ops::scale(projection_.forward(x), static_cast<float>(std::pow(static_cast<double>(hidden_), -0.5)));
  proj = norm_.forward(proj.view({B, L, n_layer_, dim_}));
  Tensor sum = ops::add(proj, tokens.view({B, L, n_layer_, dim_}));
  return ops::scale(sum, static_cast<float>(std::pow(2.0, -0.5)));
}

PerLayerInputGate PerLayerInputGate::load(const WeightLoader& w, int64_t hidden, int64_t dim, float eps) {
  PerLayerInputGate g;
  g.gate_ = Linear::load(w, "per_layer_input_gate", hidden, dim, false);
  g.projection_ = Linear::load(w, "per_layer_projection", dim, hidden, false);
  g.norm_ = RMSNorm::load(w, "post_per_layer_input_norm", hidden, eps);
  return g;
}

Tensor PerLayerInputGate::forward(const Tensor& h, const Tensor& input) const {
  Tensor g = ops::geglu(gate_.forward(h), input.contiguous(), true);  // gelu_tanh(gate(h)) * input
  Tensor out = norm_.forward(projection_.forward(g));
  ops::binary_(out, h, ops::BinaryOp::add);
  return out;
}

}  // namespace tern
