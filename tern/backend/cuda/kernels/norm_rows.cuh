// A pre-norm sub-layer's rows normalised into shared memory by every block that reads them (the MoE
// entry, moe.cuh): rms_norm(x + delta) * weight rounded to bf16 as the separate add_rms_norm kernel
// rounds them. A decode product behind its norm the same way (every block normalising the rows before
// its first weight load) measured slower in whole steps than the add+norm launch before the product
// (bench/RESULTS.md, 2026-12-03) and was removed.
#pragma once
#include "tern/backend/cuda/kernels/gemv.cuh"

namespace tern::cuda::kernels {

__device__ __forceinline__ uint4 f32x8_to_bf16(const float* f) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// xs[m, :] = bf16(rms_norm(bf16(x[m] + delta[m])) * weight) for m < M rows of K (K % 8 == 0); delta
// and weight may be null. Block 0 also writes the sums to sum (with a delta). Ends with a barrier.
template <int M, int NW>
__device__ __forceinline__ void norm_rows_to_shared(const __nv_bfloat16* __restrict__ x,
                                                    const __nv_bfloat16* __restrict__ delta,
                                                    __nv_bfloat16* __restrict__ sum,
                                                    const __nv_bfloat16* __restrict__ weight, float eps, int64_t K,
                                                    __nv_bfloat16* xs) {
  const int64_t chunks = K / 8;
  const bool write_sum = delta && blockIdx.x == 0;
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float f[8];
      bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x + m * K) + c), f);
      uint4 h;
      if (delta) {
        float d[8];
        bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(delta + m * K) + c), d);
#pragma unroll
        for (int i = 0; i < 8; ++i) f[i] += d[i];
        h = f32x8_to_bf16(f);
        bf16x8_to_f32(h, f);  // the sum as stored
        if (write_sum) reinterpret_cast<uint4*>(sum + m * K)[c] = h;
      } else {
        h = __ldg(reinterpret_cast<const uint4*>(x + m * K) + c);
      }
      reinterpret_cast<uint4*>(xs + m * K)[c] = h;
#pragma unroll
      for (int i = 0; i < 8; ++i) ss[m] += f[i] * f[i];
    }
  }
  __shared__ float part[NW][M];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s = warp_sum(ss[m]);
    if (lane == 0) part[warp][m] = s;
  }
  __syncthreads();
  float inv[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NW; ++j) s += part[j][m];
    inv[m] = inv_rms(s, K, eps);
  }
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float wf[8];
    if (weight) bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(weight) + c), wf);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      uint4* p = reinterpret_cast<uint4*>(xs + m * K) + c;
      float f[8];
      bf16x8_to_f32(*p, f);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = weight ? f[i] * inv[m] * wf[i] : f[i] * inv[m];
      *p = f32x8_to_bf16(f);
    }
  }
  __syncthreads();
}

}  // namespace tern::cuda::kernels
