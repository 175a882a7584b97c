// Gemma 4 self-attention: per-head q/k RMSNorm and a scale-free v RMSNorm, attention scale 1, keys
// doubling as values (attention_k_eq_v), and layers that own no K/V but attend through the read of an
// earlier layer of the same type (KV sharing). The cache owns the read and its mask.
#pragma once
#include <memory>

#include "tern/layers/linear.h"
#include "tern/layers/rms_norm.h"
#include "tern/ops/rope.h"
#include "tern/state/cache.h"

namespace tern {

struct GemmaAttentionShape {
  int64_t hidden = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  bool k_eq_v = false;     // values are the key projection (no v_proj)
  bool shares_kv = false;  // no k/v projections: reads another layer's K/V
  float norm_eps = 1e-6f;
};

class GemmaAttention {
 public:
  // Loads prefix.{q_proj, q_norm, o_proj} and, unless shares_kv, prefix.{k_proj, k_norm} and
  // prefix.v_proj (absent with k_eq_v). Throws the loader's missing-tensor / shape errors.
  static GemmaAttention load(const WeightLoader& w, const GemmaAttentionShape& shape, ops::RopeTable rope);

  // x [B, L, hidden] -> [B, L, hidden]: appends this step's keys/values to cache; when keep is given the
  // cache's read is moved into it (for the layers that share this layer's K/V; valid until the
  // cache's next append).
  Tensor forward(const Tensor& x, KVCache& cache, std::unique_ptr<AttentionRead>* keep = nullptr) const;
  // For a KV-sharing layer: queries rotated at positions (what the donor's cache gave its own append:
  // [L], or [B, 1] on the device under a compiled step), attending through donor.
  Tensor forward_shared(const Tensor& x, const AttentionRead& donor, const Tensor& positions) const;

  const GemmaAttentionShape& shape() const { return shape_; }

 private:
  Tensor queries(const Tensor& x) const;           // [B, Hq, L, D], normed, not yet rotated
  Tensor output(const Tensor& o, int64_t L) const;  // [B, Hq, L, D] -> [B, L, hidden]

  GemmaAttentionShape shape_;
  ops::RopeTable rope_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RMSNorm q_norm_, k_norm_;
};

}  // namespace tern
