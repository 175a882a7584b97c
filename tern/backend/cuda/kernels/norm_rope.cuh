// RMSNorm of each head row, then the rotary embedding (rotate-half pairing), for the query and key heads
// of one attention step in one launch: one warp per head row of a token, q's rows, then k's, then (when
// the keys go straight into a cache) v's rows, copied to their slot. The normed row is held in registers
// and, for the rotation's partner dims, in shared memory. D <= 256. A row's loads (the row, its norm
// weight) are issued before the block computes its token's cos/sin, so a row costs one round trip.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/norm_rope_args.h"

namespace tern::cuda::kernels {

// Grid (B * L tokens, ceil(rows per token / kNormRopeWarps)): a block's warps take heads of one token,
// q's heads first, then k's, then v's, and share that position's cos/sin, which the block computes once
// (rot / 2 <= 128 of them) while its rows load.
template <typename T, typename W, typename P>
__global__ void __launch_bounds__(kNormRopeWarps * 32) norm_rope_kernel(NormRopeArgs a) {
  grid_dependency_wait();
  __shared__ float normed[kNormRopeWarps][256];
  __shared__ float cs[2][128];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t L = a.L, t = blockIdx.x, b = t / L, l = t % L;
  const int64_t p = static_cast<int64_t>(static_cast<const P*>(a.pos)[a.per_batch ? t : l]);
  int64_t h = static_cast<int64_t>(blockIdx.y) * kNormRopeWarps + warp;
  int which = 0;  // 0: q, 1: k, 2: v
  if (h >= a.heads[0]) {
    h -= a.heads[0];
    which = 1;
    if (h >= a.heads[1]) h -= a.heads[1], which = 2;
  }
  const bool live = h < a.heads[which == 0 ? 0 : 1] && (which < 2 || a.kv[1]);
  const int64_t D = which == 2 ? a.Dv : a.D, half = a.rot / 2;
  const T* x = static_cast<const T*>(a.x[which]) + b * a.st[which][0] + h * a.st[which][1] + l * a.st[which][2];
  const W* w = static_cast<const W*>(which < 2 ? a.w[which] : nullptr);
  float v[8], wv[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    v[i] = live && which < 2 && j < D ? to_f32(x[j]) : 0.0f;
    wv[i] = live && j < D && w ? to_f32(w[j]) : 1.0f;
  }
  for (int64_t f = threadIdx.x; f < half; f += blockDim.x) {
    const float angle = static_cast<float>(p) * a.inv_freq[f];
    cs[0][f] = cosf(angle) * a.attn_scale, cs[1][f] = sinf(angle) * a.attn_scale;
  }
  __syncthreads();
  if (!live) return;
  T* y;
  if (which > 0 && a.kv[which - 1]) {
    const int64_t slot = p < 0 ? -1 : a.ring > 0 ? p % a.ring : p;
    if (slot < 0 || slot >= a.kv_n) return;
    const int64_t* s = a.kv_st[which - 1];
    y = static_cast<T*>(a.kv[which - 1]) + b * s[0] + h * s[1] + slot * s[2];
  } else {
    y = static_cast<T*>(a.out[which]) + ((b * a.heads[which] + h) * L + l) * D;
  }
  if (which == 2) {
    for (int64_t j = lane; j < D; j += 32) y[j] = x[j];
    return;
  }
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(D) + a.eps);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float r = v[i] * inv;
    if (w) r *= wv[i];
    v[i] = to_f32(from_f32<T>(r));  // rounded as ops::rms_norm stores it
    normed[warp][j] = v[i];
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float o = v[i];
    if (j < a.rot) {
      const int64_t f = j < half ? j : j - half;
      o = j < half ? v[i] * cs[0][f] - normed[warp][j + half] * cs[1][f] : v[i] * cs[0][f] + normed[warp][f] * cs[1][f];
    }
    y[j] = from_f32<T>(o);
  }
}

}  // namespace tern::cuda::kernels
