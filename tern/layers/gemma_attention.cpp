// GemmaAttention: projections, the q/k/v norms, RoPE at the cache's positions, the cache's read (or a
// donor layer's), output projection.
#include "tern/layers/gemma_attention.h"

#include "tern/ops/norm.h"

namespace tern {

GemmaAttention GemmaAttention::load(const WeightLoader& w, const GemmaAttentionShape& s, ops::RopeTable rope) {
  TERN_CHECK(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
             "[attention] expected num_attention_heads divisible by the kv heads, got {} and {}", s.n_head, s.n_head_kv);
  GemmaAttention a;
  a.shape_ = s;
  a.rope_ = std::move(rope);
  a.q_proj_ = Linear::load(w, "q_proj", s.hidden, s.n_head * s.head_dim, false);
  a.q_norm_ = RMSNorm::load(w, "q_norm", s.head_dim, s.norm_eps);
  a.o_proj_ = Linear::load(w, "o_proj", s.n_head * s.head_dim, s.hidden, false);
  if (!s.shares_kv) {
    a.k_proj_ = Linear::load(w, "k_proj", s.hidden, s.n_head_kv * s.head_dim, false);
    a.k_norm_ = RMSNorm::load(w, "k_norm", s.head_dim, s.norm_eps);
    if (!s.k_eq_v) a.v_proj_ = Linear::load(w, "v_proj", s.hidden, s.n_head_kv * s.head_dim, false);
  }
  return a;
}

Tensor GemmaAttention::queries(const Tensor& x) const {
  const int64_t B = x.size(0), L = x.size(1);
  return q_norm_.forward(q_proj_.forward(x).view({B, L, shape_.n_head, shape_.head_dim})).transpose(1, 2);
}

Tensor GemmaAttention::output(const Tensor& o, int64_t L) const {
  const int64_t B = o.size(0);
  return o_proj_.forward(o.transpose(1, 2).reshape({B, L, shape_.n_head * shape_.head_dim}));
}

Tensor GemmaAttention::forward(const Tensor& x, KVCache& cache, std::unique_ptr<AttentionRead>* keep) const {
  TERN_CHECK(!shape_.shares_kv, "[attention] expected a layer with its own k/v projections, got a KV-sharing layer");
  const int64_t B = x.size(0), L = x.size(1), D = shape_.head_dim;
  Tensor raw_k = k_proj_.forward(x).view({B, L, shape_.n_head_kv, D});  // [B, L, Hkv, D]
  Tensor raw_v = shape_.k_eq_v ? raw_k : v_proj_.forward(x).view({B, L, shape_.n_head_kv, D});
  Tensor q = cache.rope_positions(queries(x), rope_);
  Tensor k = cache.rope_positions(k_norm_.forward(raw_k).transpose(1, 2), rope_);
  Tensor v = ops::rms_norm(raw_v, Tensor(), shape_.norm_eps).transpose(1, 2);  // scale-free
  auto read = cache.append(k, v, L == 1 ? AppendPhase::decode : AppendPhase::window);
  Tensor o = read->attend(q, 1.0f);  // q and k are RMS-normed: no 1/sqrt(D)
  if (keep) *keep = std::move(read);
  return output(o, L);
}

Tensor GemmaAttention::forward_shared(const Tensor& x, const AttentionRead& donor, const Tensor& positions) const {
  const int64_t L = x.size(1);
  Tensor q = ops::rope(queries(x), positions.to(x.device()), rope_);
  return output(donor.attend(q, 1.0f), L);
}

}  // namespace tern
