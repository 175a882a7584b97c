// Skinny products for decode: out[m, n] = sum_k x[m, k] * w[n, k] for M <= 4 rows of bf16 x and bf16 w
// [N, K] row-major, and the gated variant for the MLP's stacked gate/up weights. Each warp owns output
// rows of w and streams them with 16-byte loads (four in flight per lane), so the weights, which dominate
// the bytes, are read once at full width.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/elementwise.cuh"

namespace tern::cuda::kernels {

constexpr int kGemvWarps = 4;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// acc[m] += x[m, :] . wr for one weight row wr of K bf16 (K % 8 == 0), the lane's share of it: 16-byte
// loads, four in flight per lane. The caller sums acc over the warp.
template <int M>
__device__ __forceinline__ void gemv_row(const __nv_bfloat16* __restrict__ x, const uint4* __restrict__ wr, int64_t K,
                                         int lane, float* acc) {
  const int64_t chunks = K / 8;  // 16-byte chunks per row
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
}

template <int M, typename O>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, O* __restrict__ out,
                     int64_t N, int64_t K) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (n >= N) return;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  gemv_row<M>(x, reinterpret_cast<const uint4*>(w + n * K), K, lane, acc);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == 0) out[m * N + n] = from_f32<O>(s);
  }
}

// The gated MLP's first half: w stacks the gate rows [0, N) over the up rows [N, 2N); out[m, n] =
// act(gate) * up with both products rounded to bf16 first, as the unfused product then gated_kernel
// compute it. ACT: a UnaryCode (kSilu, kGeluTanh, kGeluErf).
template <int M, int ACT>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_gated_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                      __nv_bfloat16* __restrict__ out, int64_t N, int64_t K) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  if (n >= N) return;
  float g[M], u[M];
#pragma unroll
  for (int m = 0; m < M; ++m) g[m] = u[m] = 0.0f;
  gemv_row<M>(x, reinterpret_cast<const uint4*>(w + n * K), K, lane, g);
  gemv_row<M>(x, reinterpret_cast<const uint4*>(w + (N + n) * K), K, lane, u);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float gs = to_f32(from_f32<__nv_bfloat16>(warp_sum(g[m])));
    const float us = to_f32(from_f32<__nv_bfloat16>(warp_sum(u[m])));
    if (lane == 0) out[m * N + n] = from_f32<__nv_bfloat16>(unary_f(ACT, gs, 0.0f, 0.0f) * us);
  }
}

}  // namespace tern::cuda::kernels
