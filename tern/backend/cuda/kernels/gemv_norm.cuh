// A batch-1 pre-norm entry in one launch (ops::norm_linear, ops::norm_gated_linear): the residual add
// and the RMSNorm folded into the GEMV that consumes them. A warp owns one output row, as gemv.cuh's
// W = 1 shape: it loads its weight chunks first, then computes the row's inverse RMS itself from the
// whole residual sum s = x + delta (a row of K <= 32 * kGemvNormChunks * 8, which its lanes hold in
// registers: the same chunks its weights pair with), rounds bf16(s * inv * g) as the norm kernel does
// and takes the dot products. Block 0's first warp writes s. No shared memory and no block barrier: the
// weights are in flight while the row's norm is computed. Device code only.
#pragma once
#include "tern/backend/cuda/kernels/norm_rows.cuh"

namespace tern::cuda::kernels {

constexpr int kGemvNormChunks = 8;  // most 16-byte chunks of the row a lane holds: K <= 2,048

// The lane's chunks lane + 32 i (i < CH) of the normed row (norm_rows.cuh's residual_chunk, inv_rms and
// normed_chunk; zeros past K); the writer also stores the residual sum when delta is given; g may be
// nullptr.
template <int CH>
__device__ __forceinline__ void gemv_norm_row(const __nv_bfloat16* __restrict__ x,
                                              const __nv_bfloat16* __restrict__ delta,
                                              const __nv_bfloat16* __restrict__ g, float eps,
                                              __nv_bfloat16* __restrict__ sum, int64_t K, bool writer,
                                              uint4 (&xn)[CH]) {
  const int lane = threadIdx.x & 31;
  const int chunks = static_cast<int>(K / 8);
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    const int c = lane + 32 * i;
    xn[i] = make_uint4(0, 0, 0, 0);
    if (c >= chunks) continue;
    float f[8];
    xn[i] = residual_chunk(x, delta, c, f);
    if (delta && writer) reinterpret_cast<uint4*>(sum)[c] = xn[i];
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += f[j] * f[j];
  }
  const float inv = inv_rms(warp_sum(ss), K, eps);
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    const int c = lane + 32 * i;
    if (c >= chunks) continue;
    float wf[8];
    if (g) bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(g) + c), wf);
    xn[i] = normed_chunk(xn[i], inv, g ? wf : nullptr);
  }
}

// out[n] = normed . w[n] (ACT < 0; bf16), or act(normed . w[n]) * (normed . w[N + n]) with both sums
// rounded to bf16 first (ACT a UnaryCode; w stacks the gate rows over the up rows), for one row x
// [K] (K % 8 == 0, 32 * CH * 8 >= K); sum [K] gets x + delta when delta is given. NA: weights past L1.
template <int CH, int ACT, bool NA>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_norm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ delta,
                     const __nv_bfloat16* __restrict__ g, float eps, __nv_bfloat16* __restrict__ sum,
                     const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out, int64_t N, int64_t K) {
  grid_dependency_wait();
  constexpr int R = ACT >= 0 ? 2 : 1;  // weight rows a warp reads: its gate and up rows, or its row
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (n >= N) return;  // block 0's first warp, the writer, always has a row
  const int chunks = static_cast<int>(K / 8);
  uint4 wv[R][CH];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + (n + r * N) * K);
#pragma unroll
    for (int i = 0; i < CH; ++i)
      wv[r][i] = lane + 32 * i < chunks ? load_weights16<NA>(wr + lane + 32 * i) : make_uint4(0, 0, 0, 0);
  }
  uint4 xn[CH];
  gemv_norm_row<CH>(x, delta, g, eps, sum, K, blockIdx.x == 0 && warp == 0, xn);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    acc[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < CH; ++i) {
      float wf[8], xf[8];
      bf16x8_to_f32(wv[r][i], wf);
      bf16x8_to_f32(xn[i], xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] += wf[j] * xf[j];
    }
    acc[r] = warp_sum(acc[r]);
  }
  if (lane != 0) return;
  if constexpr (ACT >= 0) {
    const float gs = to_f32(from_f32<__nv_bfloat16>(acc[0])), us = to_f32(from_f32<__nv_bfloat16>(acc[1]));
    out[n] = from_f32<__nv_bfloat16>(unary_f(ACT, gs, 0.0f, 0.0f) * us);
  } else {
    out[n] = from_f32<__nv_bfloat16>(acc[0]);
  }
}

}  // namespace tern::cuda::kernels
