// Skinny products for decode: out[m, n] = sum_k x[m, k] * w[n, k] for M <= 4 rows of bf16 x and bf16 w
// [N, K] row-major. Each warp owns output rows of w and streams them with 16-byte loads (four in
// flight per lane), so the weights, which dominate the bytes, are read once at full width.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

constexpr int kGemvWarps = 4;
constexpr int kGemvRowsPerWarp = 1;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

template <int M, typename O>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_bf16_kernel(const __nv_bfloat16* __restrict__ x,
                                                                   const __nv_bfloat16* __restrict__ w,
                                                                   O* __restrict__ out, int64_t N, int64_t K) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * kGemvRowsPerWarp;
  const int64_t chunks = K / 8;  // 16-byte chunks per row
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
    const int64_t n = n0 + r;
    if (n >= N) return;
    const uint4* wr = reinterpret_cast<const uint4*>(w + n * K);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    int64_t c = lane;
    for (; c + 96 < chunks; c += 128) {
      uint4 wv[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) wv[u] = __ldg(wr + c + 32 * u);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float wf[8];
        bf16x8_to_f32(wv[u], wf);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x + m * K) + c + 32 * u), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
        }
      }
    }
    for (; c < chunks; c += 32) {
      float wf[8];
      bf16x8_to_f32(__ldg(wr + c), wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x + m * K) + c), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float s = warp_sum(acc[m]);
      if (lane == 0) out[m * N + n] = from_f32<O>(s);
    }
  }
}

}  // namespace tern::cuda::kernels
