// GatedAttention: the full-attention layer of Qwen3.5 — GQA whose q_proj emits, per head, the query and
// an output gate; zero-centred per-head q/k RMSNorm; (partial) RoPE at the cache's positions; and
// o_proj(attn * sigmoid(gate)).
#pragma once
#include "tern/layers/linear.h"
#include "tern/layers/rms_norm.h"
#include "tern/ops/rope.h"
#include "tern/state/cache.h"

namespace tern {

struct GatedAttentionShape {
  int64_t hidden = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  bool bias = false;  // attention_bias
  float norm_eps = 1e-6f;
};

class GatedAttention {
 public:
  // Loads prefix.q_proj [n_head * 2 * head_dim, hidden] (per head: head_dim query rows, then head_dim
  // gate rows), k_proj, v_proj, o_proj, q_norm and k_norm (stored zero-centred).
  static GatedAttention load(const WeightLoader& w, const GatedAttentionShape& shape, ops::RopeTable rope);
  // x [B, L, hidden] -> [B, L, hidden]; appends this step's keys/values to cache.
  Tensor forward(const Tensor& x, KVCache& cache) const;

 private:
  GatedAttentionShape shape_;
  ops::RopeTable rope_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RMSNorm q_norm_, k_norm_;
  float scale_ = 1.0f;
};

}  // namespace tern
