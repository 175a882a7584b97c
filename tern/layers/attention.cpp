// Attention: projections, q/k norm, RoPE at the cache's positions, the cache's read, output projection.
#include "tern/layers/attention.h"

#include <cmath>

#include "tern/ops/norm_rope.h"

namespace tern {

Attention Attention::load(const WeightLoader& w, const AttentionShape& s, ops::RopeTable rope) {
  Attention a;
  a.shape_ = s;
  a.rope_ = std::move(rope);
  a.qkv_ = StackedLinear::make({Linear::load(w, "q_proj", s.hidden, s.n_head * s.head_dim, s.bias),
                                 Linear::load(w, "k_proj", s.hidden, s.n_head_kv * s.head_dim, s.bias),
                                 Linear::load(w, "v_proj", s.hidden, s.n_head_kv * s.head_dim, s.bias)},
                                w.device().is_cuda());
  a.o_proj_ = Linear::load(w, "o_proj", s.n_head * s.head_dim, s.hidden, s.bias);
  if (s.qk_norm) {
    a.q_norm_ = RMSNorm::load(w, "q_norm", s.head_dim, s.norm_eps);
    a.k_norm_ = RMSNorm::load(w, "k_norm", s.head_dim, s.norm_eps);
  }
  a.scale_ = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  return a;
}

Tensor Attention::forward(const Tensor& x, KVCache& cache) const { return attend(qkv_.forward(x), cache); }

Tensor Attention::forward(const ops::PreNorm& in, KVCache& cache, Tensor& sum) const {
  return attend(qkv_.forward(in, sum), cache);
}

Tensor Attention::attend(const std::vector<Tensor>& qkv, KVCache& cache) const {
  const Tensor& x = qkv[0];
  const int64_t B = x.size(0), L = x.size(1), D = shape_.head_dim;
  // [B, L, H*D] -> [B, H, L, D] (a strided view)
  Tensor q = qkv[0].view({B, L, shape_.n_head, D});
  Tensor k = qkv[1].view({B, L, shape_.n_head_kv, D});
  Tensor v = qkv[2].view({B, L, shape_.n_head_kv, D}).transpose(1, 2);
  std::unique_ptr<AttentionRead> read;
  const AppendPhase phase = L == 1 ? AppendPhase::decode : AppendPhase::window;
  if (shape_.qk_norm) {  // the per-head norms and the rotation in one pass (the cache may write k and v from it)
    KVCache::RopedRead r = cache.append_norm_rope(q.transpose(1, 2), k.transpose(1, 2), v,
                                                  {q_norm_.weight, k_norm_.weight, q_norm_.eps, &rope_}, phase);
    q = r.q;
    read = std::move(r.read);
  } else {
    q = cache.rope_positions(q.transpose(1, 2), rope_);
    k = cache.rope_positions(k.transpose(1, 2), rope_);
    read = cache.append(k, v, phase);
  }
  Tensor o = read->attend(q, scale_);  // [B, H, L, D]
  return o_proj_.forward(o.transpose(1, 2).reshape({B, L, shape_.n_head * D}));
}

}  // namespace tern
