// Decode products for 5 to 32 rows on tensor cores: out[m, n] = sum_k x[m, k] w[n, k] for bf16 x [M, K]
// and bf16 w [N, K] row-major (K % 32 == 0), and the gated variant over stacked gate/up rows. The bytes
// are the weights' (M is small), so each warp streams 16 weight rows from global memory straight into
// mma A fragments: a lane's 16-byte load of 8 consecutive k feeds two k-steps, and the activations' B
// fragments take the same permutation of k, which a dot product does not see. A block is 8 warps, 128
// weight rows; the S blocks of a thread-block cluster split K between them and sum their partial tiles
// through distributed shared memory, in a fixed order, so there is no workspace and no second launch.
#pragma once
#include <cooperative_groups.h>

#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/elementwise.cuh"
#include "tern/backend/cuda/kernels/mma.cuh"

namespace tern::cuda::kernels {

constexpr int kMmaGemvWarps = 8;                      // 16 weight rows each
constexpr int kMmaGemvRows = 16 * kMmaGemvWarps;      // weight rows per block
constexpr int kMmaGemvDepth = 4;                      // 32-wide k chunks in flight per lane, two 16-byte loads each
constexpr int kMmaGemvPartStride = kMmaGemvRows + 4;  // f32 per token row of a partial tile (no bank conflicts)

// One 32-wide chunk: lane (g, t) holds k [8t, 8t + 8) of rows g (lo) and g + 8 (hi) and, per token tile
// j, of token 8j + g (xv). Logical k-step s takes physical k 8t + 4s + [0, 4) as the fragments' k 2t,
// 2t + 1, 2t + 8, 2t + 9, the same map for A and B.
template <int MT>
__device__ __forceinline__ void mma_gemv_chunk(const uint4& lo, const uint4& hi, const uint4* xb,
                                               const uint32_t (&xr)[MT], int64_t at, float (&acc)[MT][4]) {
  const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const uint4 xv = __ldg(xb + xr[j] + at);
    mma16816<__nv_bfloat16>(acc[j], a0, xv.x, xv.y);
    mma16816<__nv_bfloat16>(acc[j], a1, xv.z, xv.w);
  }
}

// Partial sums of this warp's 16 weight rows [row0, row0 + 16) (rows past row_end are read as row_end - 1
// and never stored) against tokens [0, 8 MT) (tokens past M read as M - 1) over chunks [c0, c1).
template <int MT>
__device__ __forceinline__ void mma_gemv_warp(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                              int M, int64_t row0, int64_t row_end, int64_t K, int64_t c0, int64_t c1,
                                              float (&acc)[MT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t rlo = min(row0 + g, row_end - 1), rhi = min(row0 + g + 8, row_end - 1);
  const uint4* wlo = reinterpret_cast<const uint4*>(w + rlo * K) + t;
  const uint4* whi = reinterpret_cast<const uint4*>(w + rhi * K) + t;
  const uint4* xb = reinterpret_cast<const uint4*>(x) + t;
  uint32_t xr[MT];  // token rows, in 16-byte units (x is at most 32 rows)
#pragma unroll
  for (int j = 0; j < MT; ++j) xr[j] = static_cast<uint32_t>(min(8 * j + g, M - 1) * (K / 8));
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  constexpr int D = kMmaGemvDepth;
  int64_t c = c0;
  for (; c + D <= c1; c += D) {
    uint4 lo[D], hi[D];
#pragma unroll
    for (int u = 0; u < D; ++u) {
      lo[u] = load_stream16(wlo + (c + u) * 4);
      hi[u] = load_stream16(whi + (c + u) * 4);
    }
#pragma unroll
    for (int u = 0; u < D; ++u) mma_gemv_chunk<MT>(lo[u], hi[u], xb, xr, (c + u) * 4, acc);
  }
  for (; c < c1; ++c) mma_gemv_chunk<MT>(load_stream16(wlo + c * 4), load_stream16(whi + c * 4), xb, xr, c * 4, acc);
}

// ACT < 0: out[m, n] (O = bf16 or f32) over N rows of w, 128 per block. ACT a UnaryCode: w stacks gate
// rows [0, N) over up rows [N, 2N); a block's warps 0-3 take 64 gate rows and 4-7 the matching up rows,
// and out[m, n] = act(gate) * up in bf16 with both sums rounded to bf16 first (as the unfused product
// then the gated kernel compute it). Grid (S, blocks of rows), launched as clusters of S along x.
template <int MT, int ACT, typename O>
__global__ void __launch_bounds__(kMmaGemvWarps * 32, 2)
    gemv_mma_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, O* __restrict__ out,
                    int M, int64_t N, int64_t K) {
  grid_dependency_wait();
  namespace cg = cooperative_groups;
  __shared__ float part[8 * MT][kMmaGemvPartStride];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int S = static_cast<int>(gridDim.x), rank = static_cast<int>(blockIdx.x);
  constexpr bool kGated = ACT >= 0;
  constexpr int kOut = kGated ? kMmaGemvRows / 2 : kMmaGemvRows;  // outputs per block
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kOut;
  int64_t row0, row_end;
  if constexpr (kGated) {
    const int half = warp / (kMmaGemvWarps / 2);
    row0 = half * N + n0 + 16 * (warp % (kMmaGemvWarps / 2));
    row_end = (half + 1) * N;
  } else {
    row0 = n0 + 16 * warp;
    row_end = N;
  }
  const int64_t chunks = K / 32;
  float acc[MT][4];
  mma_gemv_warp<MT>(x, w, M, row0, row_end, K, chunks * rank / S, chunks * (rank + 1) / S, acc);
  // the block's partial tile, token-major: part[token][weight row of the block]
  const int r = 16 * warp + g;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    part[8 * j + 2 * t][r] = acc[j][0];
    part[8 * j + 2 * t + 1][r] = acc[j][1];
    part[8 * j + 2 * t][r + 8] = acc[j][2];
    part[8 * j + 2 * t + 1][r + 8] = acc[j][3];
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  // block `rank` finishes tokens rank, rank + S, ...: the cluster's partial tiles summed in rank order
  const int my_tokens = (M - rank + S - 1) / S;
  for (int i = threadIdx.x; i < my_tokens * kOut; i += kMmaGemvWarps * 32) {
    const int m = rank + S * (i / kOut), o = i % kOut;
    const int64_t n = n0 + o;
    if (n >= N) continue;  // before the loads: every peer read below is consumed before the closing barrier
    // the S peers' loads issued together (unrolled, predicated), then summed in rank order
    float v0[kClusterMaxBlocks], v1[kClusterMaxBlocks];
#pragma unroll
    for (int q = 0; q < kClusterMaxBlocks; ++q) {
      const float* pq = cluster.map_shared_rank(&part[m][0], q < S ? q : 0);
      v0[q] = q < S ? pq[o] : 0.0f;
      v1[q] = kGated && q < S ? pq[o + kOut] : 0.0f;
    }
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int q = 0; q < kClusterMaxBlocks; ++q) {
      if (q < S) s0 += v0[q], s1 += v1[q];
    }
    if constexpr (kGated) {
      const float gs = to_f32(from_f32<__nv_bfloat16>(s0)), us = to_f32(from_f32<__nv_bfloat16>(s1));
      out[m * N + n] = from_f32<O>(unary_f(ACT, gs, 0.0f, 0.0f) * us);
    } else {
      out[m * N + n] = from_f32<O>(s0);
    }
  }
  cluster_release_peers();  // keep this block's tile alive until the cluster has read it
}

}  // namespace tern::cuda::kernels
