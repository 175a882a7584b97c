// Skinny products for decode: out[m, n] = sum_k x[m, k] * w[n, k] for M <= 4 rows of bf16 x and bf16 w
// [N, K] row-major, and the gated variant for the MLP's stacked gate/up weights. W warps share each
// output row (each a strided share of K, summed through shared memory), and every lane keeps U 16-byte
// weight loads in flight, so the weights, which dominate the bytes, stream at full width even when N
// alone would leave the GPU's warps idle.
#pragma once
#include <type_traits>

#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/elementwise.cuh"

namespace tern::cuda::kernels {

constexpr int kGemvWarps = 4;  // warps per block: kGemvWarps / W output rows per block

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// Loads in flight per lane for rows of K split over W warps: 8 where each lane's share of a row fills
// them, else 4 (the launchers of gemv.cu and moe.cu).
__host__ __device__ constexpr int gemv_depth(int64_t K, int W) { return K / 8 >= 256 * W ? 8 : 4; }

// The 8 activations of chunk c of an activation row as f32: bf16 from shared memory (SX) or through the
// read-only cache, or f32 (the MoE down product's hidden rows) through the read-only cache.
template <bool SX, typename X>
__device__ __forceinline__ void load_x8(const X* row, int64_t c, float* f) {
  if constexpr (std::is_same_v<X, float>) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(row) + 2 * c);
    const float4 b = __ldg(reinterpret_cast<const float4*>(row) + 2 * c + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else if constexpr (SX) {
    bf16x8_to_f32(reinterpret_cast<const uint4*>(row)[c], f);
  } else {
    bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(row) + c), f);
  }
}

// acc[m] += x[m, 8 c : 8 c + 8] . w for the M activation rows of K elements at x (SX, X: as load_x8):
// chunk c of a weight row, its 8 bf16 weights w.
template <int M, bool SX, typename X>
__device__ __forceinline__ void gemv_chunk(const X* x, int64_t K, const uint4& w, int64_t c, float* acc) {
  float wf[8];
  bf16x8_to_f32(w, wf);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[8];
    load_x8<SX>(x + m * K, c, xf);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
  }
}

// acc[m] += x[m, :] . wr over this lane's share of one weight row wr of K bf16 (K % 8 == 0): the row's
// 16-byte chunks are taken in groups of U * 32 * W, lane v (of the row's 32 * W) reading chunks
// v, v + 32W, ... of each group, the last partial group predicated. The caller sums acc over the lanes.
// SX: x is in shared memory (read without the read-only cache path). X: bf16, or f32 (not in shared memory).
// NA: the weights are loaded past L1 (load_stream16), leaving L1 to the activations.
template <int M, int W, int U, bool SX = false, typename X = __nv_bfloat16, bool NA = false>
__device__ __forceinline__ void gemv_row(const X* __restrict__ x, const uint4* __restrict__ wr, int64_t K, int v,
                                         float* acc) {
  constexpr int S = 32 * W;
  const int64_t chunks = K / 8;
  int64_t g = 0;
  for (; g + U * S <= chunks; g += U * S) {
    uint4 wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) wv[u] = load_weights16<NA>(wr + g + v + S * u);
#pragma unroll
    for (int u = 0; u < U; ++u) gemv_chunk<M, SX>(x, K, wv[u], g + v + S * u, acc);
  }
  if (g >= chunks) return;
  uint4 wv[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    wv[u] = g + v + S * u < chunks ? load_weights16<NA>(wr + g + v + S * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (g + v + S * u >= chunks) break;
    gemv_chunk<M, SX>(x, K, wv[u], g + v + S * u, acc);
  }
}

// Sums acc[0..C) over the W warps of each output row: warp-reduced, then (W > 1) through shared memory.
// Afterwards lane 0 of the row's first warp holds the totals; `lead` says whether this thread is it.
template <int C, int W, int NW = kGemvWarps>
__device__ __forceinline__ bool gemv_reduce(float* acc) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = warp_sum(acc[c]);
  if constexpr (W > 1) {
    __shared__ float part[NW][C];
    if (lane == 0) {
#pragma unroll
      for (int c = 0; c < C; ++c) part[warp][c] = acc[c];
    }
    __syncthreads();
    if (warp % W != 0 || lane != 0) return false;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < W; ++j) s += part[warp + j][c];
      acc[c] = s;
    }
    return true;
  } else {
    return lane == 0;
  }
}

// out[m, n] for this warp's row n (NW warps per block); every thread of the block must call it (W > 1 reduces through
// shared memory).
template <int M, int W, int U, bool SX, typename O, int NW = kGemvWarps, bool NA = false>
__device__ __forceinline__ void gemv_body(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                          O* __restrict__ out, int64_t N, int64_t K) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (NW / W) + warp / W;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  if (n < N)
    gemv_row<M, W, U, SX, __nv_bfloat16, NA>(x, reinterpret_cast<const uint4*>(w + n * K), K, (warp % W) * 32 + lane,
                                             acc);
  if (!gemv_reduce<M, W, NW>(acc) || n >= N) return;
#pragma unroll
  for (int m = 0; m < M; ++m) out[m * N + n] = from_f32<O>(acc[m]);
}

// The gated MLP's first half: w stacks the gate rows [0, N) over the up rows [N, 2N); out[m, n] =
// act(gate) * up with both products rounded to bf16 first, as the unfused product then gated_kernel
// compute it. ACT: a UnaryCode (kSilu, kGeluTanh, kGeluErf). Called by every thread, as gemv_body.
template <int M, int W, int U, bool SX, int ACT, int NW = kGemvWarps, bool NA = false>
__device__ __forceinline__ void gemv_gated_body(const __nv_bfloat16* __restrict__ x,
                                                const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                                                int64_t N, int64_t K) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (NW / W) + warp / W;
  float acc[2 * M];  // gate sums, then up sums
#pragma unroll
  for (int m = 0; m < 2 * M; ++m) acc[m] = 0.0f;
  if (n < N) {
    const int v = (warp % W) * 32 + lane;
    gemv_row<M, W, U, SX, __nv_bfloat16, NA>(x, reinterpret_cast<const uint4*>(w + n * K), K, v, acc);
    gemv_row<M, W, U, SX, __nv_bfloat16, NA>(x, reinterpret_cast<const uint4*>(w + (N + n) * K), K, v, acc + M);
  }
  if (!gemv_reduce<2 * M, W, NW>(acc) || n >= N) return;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float gs = to_f32(from_f32<__nv_bfloat16>(acc[m]));
    const float us = to_f32(from_f32<__nv_bfloat16>(acc[M + m]));
    out[m * N + n] = from_f32<__nv_bfloat16>(unary_f(ACT, gs, 0.0f, 0.0f) * us);
  }
}

template <int M, int W, int U, typename O, bool NA>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, O* __restrict__ out,
                     int64_t N, int64_t K) {
  grid_dependency_wait();
  gemv_body<M, W, U, false, O, kGemvWarps, NA>(x, w, out, N, K);
}

template <int M, int W, int U, int ACT, bool NA>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_gated_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                      __nv_bfloat16* __restrict__ out, int64_t N, int64_t K) {
  grid_dependency_wait();
  gemv_gated_body<M, W, U, false, ACT, kGemvWarps, NA>(x, w, out, N, K);
}

}  // namespace tern::cuda::kernels
