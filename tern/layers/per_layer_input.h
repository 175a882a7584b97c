// Per-layer input embeddings (Gemma 4's "PLE"): a packed token table and a projection of the main
// embeddings give every decoder layer its own small input vector, which each layer gates into its
// residual stream.
#pragma once
#include "tern/layers/linear.h"
#include "tern/layers/rms_norm.h"

namespace tern {

// The model-level half: one [n_layer, dim] input per token.
class PerLayerEmbedding {
 public:
  // Loads prefix.embed_tokens_per_layer [vocab, n_layer*dim], prefix.per_layer_model_projection
  // [n_layer*dim, hidden] and prefix.per_layer_projection_norm [dim].
  static PerLayerEmbedding load(const WeightLoader& w, int64_t vocab, int64_t hidden, int64_t n_layer, int64_t dim,
                                float eps);
  // ids [B, L] i32 and the scaled main embeddings x [B, L, hidden] -> [B, L, n_layer, dim]:
  // (norm(proj(x) / sqrt(hidden)) + table[ids] * sqrt(dim)) / sqrt(2).
  Tensor forward(const Tensor& ids, const Tensor& x) const;

 private:
  Embedding table_;
  Linear projection_;
  RMSNorm norm_;
  int64_t hidden_ = 0, n_layer_ = 0, dim_ = 0;
};

// The per-layer half, after a block's feed-forward:
// h + norm(projection(gelu_tanh(gate(h)) * input)).
class PerLayerInputGate {
 public:
  // Loads prefix.per_layer_input_gate [dim, hidden], prefix.per_layer_projection [hidden, dim] and
  // prefix.post_per_layer_input_norm [hidden].
  static PerLayerInputGate load(const WeightLoader& w, int64_t hidden, int64_t dim, float eps);
  // h [B, L, hidden], input [B, L, dim] -> [B, L, hidden]
  Tensor forward(const Tensor& h, const Tensor& input) const;

 private:
  Linear gate_, projection_;
  RMSNorm norm_;
};

}  // namespace tern
