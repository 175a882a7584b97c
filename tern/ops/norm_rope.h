// The query/key preparation of attention layers with per-head q/k norms, in one pass: RMSNorm of each
// head row, then the rotary embedding at the cache's positions.
#pragma once
#include "tern/core/tensor.h"
#include "tern/ops/attention.h"
#include "tern/ops/rope.h"

namespace tern::ops {

// q [B, Hq, L, D] and k [B, Hk, L, D] (any strides, last dim contiguous), weights wq and wk [D] (or
// undefined for the scale-free norm), positions as ops::rope takes them. Returns contiguous
// {rope(rms_norm(q, wq, eps)), rope(rms_norm(k, wk, eps))}: the same numbers as the two ops one after
// the other (the normed rows rounded to q's dtype before the rotation), in one kernel launch on CUDA.
struct NormRoped {
  Tensor q, k;
};
NormRoped norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
                    const Tensor& positions, const RopeTable& table);

// The compiled decode step's form (L = 1, positions [B] or [B, 1] i32 on the device): norm_rope, with
// the rotated keys and v [B, Hk, 1, Dv] written into a cache's storage as write_positions(keys, k,
// values, v, positions, ring) writes them. Returns the rotated queries. One kernel launch on CUDA (the
// two ops in turn on the CPU).
Tensor norm_rope_write(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk, float eps,
                       const Tensor& positions, const RopeTable& table, Tensor& keys, Tensor& values, int64_t ring = 0);

// norm_rope_write (no ring), then the compiled step's read of the rotated queries: sdpa(q', keys[:, :, :span],
// values[:, :, :span], scale, mask, softcap): the two calls. (A one-launch form inside flash-decoding was
// measured 1.3-2.4 % slower on the 0.6B step (bench/RESULTS.md, 2026-12-05) and removed (2026-12-06).)
Tensor norm_rope_write_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk,
                            float eps, const Tensor& positions, const RopeTable& table, Tensor& keys, Tensor& values,
                            int64_t span, float scale, const AttentionMask& mask, float softcap);

}  // namespace tern::ops

namespace tern::cuda {
void norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
               const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor& out_k);
void norm_rope_write(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk, float eps,
                     const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor& keys, Tensor& values,
                     int64_t ring);
}  // namespace tern::cuda
