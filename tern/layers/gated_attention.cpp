// GatedAttention: projections, the query/gate split, q/k norm, RoPE, the cache's read, the gated output.
#include "tern/layers/gated_attention.h"

#include <cmath>

#include "tern/layers/zero_centered_rms_norm.h"
#include "tern/ops/elementwise.h"

namespace tern {

GatedAttention GatedAttention::load(const WeightLoader& w, const GatedAttentionShape& s, ops::RopeTable rope) {
  TERN_CHECK(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
             "[gated-attention] expected num_attention_heads divisible by num_key_value_heads, got {} and {}", s.n_head,
             s.n_head_kv);
  GatedAttention a;
  a.shape_ = s;
  a.rope_ = std::move(rope);
  a.q_proj_ = Linear::load(w, "q_proj", s.hidden, s.n_head * s.head_dim * 2, s.bias);
  a.k_proj_ = Linear::load(w, "k_proj", s.hidden, s.n_head_kv * s.head_dim, s.bias);
  a.v_proj_ = Linear::load(w, "v_proj", s.hidden, s.n_head_kv * s.head_dim, s.bias);
  a.o_proj_ = Linear::load(w, "o_proj", s.n_head * s.head_dim, s.hidden, s.bias);
  a.q_norm_ = load_zero_centered_rms_norm(w, "q_norm", s.head_dim, s.norm_eps);
  a.k_norm_ = load_zero_centered_rms_norm(w, "k_norm", s.head_dim, s.norm_eps);
  a.scale_ = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  return a;
}

Tensor GatedAttention::forward(const Tensor& x, KVCache& cache) const {
  const int64_t B = x.size(0), L = x.size(1), D = shape_.head_dim, H = shape_.n_head;
  Tensor qg = q_proj_.forward(x).view({B, L, H, 2 * D});            // per head: [query | gate]
  Tensor q = qg.slice(3, 0, D);                                        // [B, L, H, D] (strided)
  Tensor gate = qg.slice(3, D, 2 * D).reshape({B, L, H * D});
  Tensor k = k_proj_.forward(x).view({B, L, shape_.n_head_kv, D});
  Tensor v = v_proj_.forward(x).view({B, L, shape_.n_head_kv, D}).transpose(1, 2);
  q = cache.rope_positions(q_norm_.forward(q).transpose(1, 2), rope_);
  k = cache.rope_positions(k_norm_.forward(k).transpose(1, 2), rope_);
  auto read = cache.append(k, v, L == 1 ? AppendPhase::decode : AppendPhase::window);
  Tensor o = read->attend(q, scale_).transpose(1, 2).reshape({B, L, H * D});  // [B, L, H*D]
  return o_proj_.forward(ops::mul(o, ops::sigmoid(gate)));
}

}  // namespace tern
