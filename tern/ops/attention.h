// Scaled dot-product attention with GQA and the masks caches ask for (causal with a query offset,
// sliding window, per-row key lengths, an explicit additive bias), plus an optional logit softcap.
// Model code never calls this directly: a cache's AttentionRead does (DESIGN.md §3).
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

struct AttentionMask {
  bool causal = true;
  // Query i sits at key position i + q_offset: key j is visible iff j <= i + q_offset (when causal).
  int64_t q_offset = 0;
  // > 0: additionally j > i + q_offset - window (a sliding window of `window` keys including the query's own).
  int64_t window = 0;
  // Optional [B] i32 >= 0: keys j >= kv_len[b] are invisible to row b (right-padded batches); a length
  // past Lk hides nothing (a ring's step reads all its slots with the sequence's length).
  Tensor kv_len;
  // Optional additive f32 bias broadcastable to [B, Hq, Lq, Lk] (-inf hides a key).
  Tensor bias;
  // >= 0: a promise that kv_len and every key below the last fresh_keys of each row's visible range
  // (kv_len[b], else Lk) were written before the device work queued just before this read, so a backend
  // may load them before that work finishes (CUDA: before the grid wait). -1: no promise (the default).
  int64_t fresh_keys = -1;
};

// q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] with Hq % Hkv == 0 (query head h reads kv
// head h / (Hq / Hkv)) -> [B, Hq, Lq, Dv] in q's dtype. softmax(q k^T * scale [softcapped] + mask) v,
// f32 accumulation. A query row that sees no key yields zeros.
Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const AttentionMask& mask,
            float softcap = 0.0f);

// sdpa through calls of head dims <= max_dim, for backends with a head-dim limit (the CUDA kernels
// take <= 256, and 512 in bf16/f16 without a bias; sdpa routes the other wider heads here): the scores of
// q/k dims past max_dim are one f32 matmul handed to the kernel as an additive bias (masks stay the kernel's), and
// values wider than max_dim are attended in slices (softmax weights do not depend on v). Same contract as sdpa; throws
// "[sdpa] expected ..." for softcap > 0 with q/k dims past max_dim (the cap needs the whole score).
Tensor sdpa_split_heads(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const AttentionMask& mask,
                        float softcap, int64_t max_dim);

}  // namespace tern::ops

namespace tern::cpu {
void sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const ops::AttentionMask& mask,
          float softcap, Tensor& out);
}
namespace tern::cuda {
void sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const ops::AttentionMask& mask,
          float softcap, Tensor& out);
// The tensor-core prefill's rows as one split of a combine: partial [B Hq Lq][Dv + 2] (unnormalised
// accumulators, the max in the natural-log domain, the sum) instead of an output; bf16/f16, head dims
// 64-256, >= 16 queries, a causal / window mask without bias or kv_len (kv_window_attention's own keys).
void sdpa_partial(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const ops::AttentionMask& mask,
                  float softcap, float* partial);
// Whether cuda::sdpa takes these heads wider than 256 itself (512-dim heads on tensor cores: a prefill of
// >= 16 queries or flash-decoding of <= 16 query rows per kv head); else ops::sdpa splits them.
bool sdpa_takes_wide_heads(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask);
}
