// RMSNorm of each head row, then the rotary embedding (rotate-half pairing), for the query and key heads
// of one attention step in one launch: one warp per row (b, h, l) of q's rows and then k's, the normed
// row held in registers and, for the rotation's partner dims, in shared memory. D <= 256.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/norm_rope_args.h"

namespace tern::cuda::kernels {

template <typename T, typename W, typename P>
__global__ void __launch_bounds__(kNormRopeWarps * 32) norm_rope_kernel(NormRopeArgs a) {
  grid_dependency_wait();
  __shared__ float normed[kNormRopeWarps][256];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t row = static_cast<int64_t>(blockIdx.x) * kNormRopeWarps + warp;
  const int64_t q_rows = a.B * a.heads[0] * a.L;
  const int which = row < q_rows ? 0 : 1;
  if (which) row -= q_rows;
  const int64_t H = a.heads[which], L = a.L, D = a.D;
  if (row >= a.B * H * L) return;
  const int64_t l = row % L, h = (row / L) % H, b = row / (L * H);
  const T* x = static_cast<const T*>(a.x[which]) + b * a.st[which][0] + h * a.st[which][1] + l * a.st[which][2];
  const W* w = static_cast<const W*>(a.w[which]);
  T* y = static_cast<T*>(a.out[which]) + row * D;
  float v[8];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    v[i] = j < D ? to_f32(x[j]) : 0.0f;
    ss += v[i] * v[i];
  }
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(D) + a.eps);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float t = v[i] * inv;
    if (w) t *= to_f32(w[j]);
    v[i] = to_f32(from_f32<T>(t));  // rounded as ops::rms_norm stores it
    normed[warp][j] = v[i];
  }
  __syncwarp();
  const float p = static_cast<float>(static_cast<const P*>(a.pos)[a.per_batch ? b * L + l : l]);
  const int64_t half = a.rot / 2;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float o = v[i];
    if (j < a.rot) {
      const int64_t f = j < half ? j : j - half;
      const float angle = p * a.inv_freq[f];
      const float c = cosf(angle) * a.attn_scale, s = sinf(angle) * a.attn_scale;
      o = j < half ? v[i] * c - normed[warp][j + half] * s : v[i] * c + normed[warp][f] * s;
    }
    y[j] = from_f32<T>(o);
  }
}

}  // namespace tern::cuda::kernels
