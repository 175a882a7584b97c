// Mixture-of-experts kernels. Decode (few tokens): a grouped GEMV over (token, slot) pairs reading the
// expert ids from device memory — gate_up with the activation fused, then down with the routing weight
// and the sum over slots fused (a block per output element, a warp per slot; no atomics). Prefill: a counting sort
// of the pairs by expert (rows to gather, each pair's sorted position) and the weighted combine.
#pragma once
#include <cooperative_groups.h>

#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/elementwise.cuh"
#include "tern/backend/cuda/kernels/norm_rows.cuh"

namespace tern::cuda::kernels {

constexpr int kMoeWarps = 8;  // warps per block of the decode GEMVs

// This lane's share of w[0:K] . x[0:K] (bf16 w, K % 8 == 0, 16-byte aligned rows; x bf16 or f32), U
// loads in flight (gemv_row of one row over one warp; NA: weights past L1); warp_sum gives the dot.
template <int U, typename X, bool NA>
__device__ __forceinline__ float lane_dot(const __nv_bfloat16* __restrict__ w, const X* __restrict__ x, int64_t K,
                                          int lane) {
  float acc = 0.0f;
  gemv_row<1, 1, U, false, X, NA>(x, reinterpret_cast<const uint4*>(w), K, lane, &acc);
  return acc;
}

// h[p, i] = act(gate_e[i] . x[p / k]) * (up_e[i] . x[p / k]) with e = experts[p]; grid (ceil(I / kMoeWarps),
// P = T * k), kMoeWarps warps. x [T, H] bf16, gate_up [E, 2I, H] bf16, h [P, I] f32. An expert id outside
// [0, E) writes zeros. U: loads in flight per lane, NA: weights past L1 (lane_dot).
template <bool kGeglu, int U, bool NA>
__global__ void __launch_bounds__(kMoeWarps * 32)
    moe_gate_up_kernel(const __nv_bfloat16* __restrict__ x, const int32_t* __restrict__ experts, int64_t k,
                       const __nv_bfloat16* __restrict__ gate_up, int64_t E, int64_t H, int64_t I,
                       float* __restrict__ h) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kMoeWarps + warp, p = blockIdx.y;
  if (i >= I) return;
  const int64_t e = experts[p];
  if (e < 0 || e >= E) {
    if (lane == 0) h[p * I + i] = 0.0f;
    return;
  }
  const __nv_bfloat16* xr = x + (p / k) * H;
  const __nv_bfloat16* gate = gate_up + (e * 2 * I + i) * H;
  const float gl = lane_dot<U, __nv_bfloat16, NA>(gate, xr, H, lane);
  const float ul = lane_dot<U, __nv_bfloat16, NA>(gate + I * H, xr, H, lane);
  const float g = warp_sum(gl), u = warp_sum(ul);
  if (lane == 0) {
    const float a = kGeglu ? gelu_tanh_f(g) : g / (1.0f + expf(-g));
    h[p * I + i] = a * u;
  }
}

// out[t, n] = sum_j weights[t, j] * (down_e[n] . h[t * k + j]) with e = experts[t, j]; grid (H, T),
// kMoeWarps warps: warp w takes slots w, w + kMoeWarps, ..., so a token's k expert rows are read at once
// rather than one after another, and the block sums the warps' terms in a fixed order (no atomics).
// down [E, H, I] bf16, h [T * k, I] f32, out [T, H] of O (f32 or bf16, rounded once). Slots with an
// expert id outside [0, E) are skipped.
template <int U, typename O, bool NA>
__global__ void __launch_bounds__(kMoeWarps * 32)
    moe_down_kernel(const float* __restrict__ h, const int32_t* __restrict__ experts, const float* __restrict__ weights,
                    int64_t k, const __nv_bfloat16* __restrict__ down, int64_t E, int64_t H, int64_t I,
                    O* __restrict__ out) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = blockIdx.x, t = blockIdx.y;
  float acc = 0.0f;
  for (int64_t j = warp; j < k; j += kMoeWarps) {
    const int64_t p = t * k + j, e = experts[p];
    if (e < 0 || e >= E) continue;
    acc += weights[p] * lane_dot<U, float, NA>(down + (e * H + n) * I, h + p * I, I, lane);
  }
  __shared__ float part[kMoeWarps];
  acc = warp_sum(acc);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kMoeWarps; ++w) sum += part[w];
    out[t * H + n] = from_f32<O>(sum);
  }
}

// counts[e] += number of pairs routed to e (counts zeroed by the caller); ids outside [0, E) skipped.
__global__ void moe_count_kernel(const int32_t* __restrict__ experts, int64_t P, int64_t E, int32_t* counts) {
  grid_dependency_wait();
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < P;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = experts[p];
    if (e >= 0 && e < E) atomicAdd(counts + e, 1);
  }
}

// offsets[e] = cursor[e] = sum of counts[0:e]; one thread (E is small).
__global__ void moe_offsets_kernel(const int32_t* __restrict__ counts, int64_t E, int32_t* __restrict__ offsets,
                                   int32_t* __restrict__ cursor) {
  grid_dependency_wait();
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int32_t at = 0;
  for (int64_t e = 0; e < E; ++e) {
    offsets[e] = at;
    cursor[e] = at;
    at += counts[e];
  }
}

// Places each pair in its expert's bucket: rows[slot] = token (p / k), pos[p] = slot; pos[p] = -1 for
// an id outside [0, E). The order inside a bucket is the atomics' order (each row's product does not
// depend on it; the combine reads through pos in slot order).
__global__ void moe_place_kernel(const int32_t* __restrict__ experts, int64_t P, int64_t k, int64_t E,
                                 int32_t* cursor, int32_t* __restrict__ rows, int32_t* __restrict__ pos) {
  grid_dependency_wait();
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < P;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t e = experts[p];
    if (e < 0 || e >= E) {
      pos[p] = -1;
      continue;
    }
    const int32_t slot = atomicAdd(cursor + e, 1);
    rows[slot] = static_cast<int32_t>(p / k);
    pos[p] = slot;
  }
}

// out[t, c] = sum_j weights[t, j] * y[pos[t, j], c] over slots with pos >= 0 (slot order: deterministic).
// y [n_sorted, H] f32, out [T, H] of O (f32 or bf16, the f32 sum rounded once).
template <typename O>
__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ pos,
                                   const float* __restrict__ weights, int64_t T, int64_t k, int64_t H,
                                   O* __restrict__ out) {
  grid_dependency_wait();
  const int64_t n = T * H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / H, c = i % H;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t s = pos[t * k + j];
      if (s >= 0) acc += weights[t * k + j] * y[static_cast<int64_t>(s) * H + c];
    }
    out[i] = from_f32<O>(acc);
  }
}

// The grouped products of a batch sorted by expert (moe_place_kernel's buckets): block (tile, e) takes
// its kMoeWarps output rows of expert e, a warp each, against the expert's routed rows kGroupRows at a
// time, so each weight row is read once per kGroupRows slots; experts with no slots return at once.
// Reads the counts and offsets on the device (no host sync). Slot s of a bucket is sorted row
// offsets[e] + s; each slot's sums do not depend on its place in the bucket.
constexpr int kGroupRows = 4;

// h[slot, i] = act(gate_e[i] . x[token]) * (up_e[i] . x[token]); grid (ceil(I / kMoeWarps), E). x [T, H]
// bf16, rows [n_sorted] (the token of each slot), gate_up [E, 2I, H] bf16, h [n_sorted, I] f32.
template <bool kGeglu>
__global__ void __launch_bounds__(kMoeWarps * 32)
    moe_grouped_gate_up_kernel(const __nv_bfloat16* __restrict__ x, const int32_t* __restrict__ counts,
                               const int32_t* __restrict__ offsets, const int32_t* __restrict__ rows,
                               const __nv_bfloat16* __restrict__ gate_up, int64_t H, int64_t I, float* __restrict__ h) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * kMoeWarps + warp;
  const int n = counts[e];
  if (n == 0 || i >= I) return;
  const int off = offsets[e];
  const uint4* gw = reinterpret_cast<const uint4*>(gate_up + (e * 2 * I + i) * H);
  const uint4* uw = reinterpret_cast<const uint4*>(gate_up + (e * 2 * I + I + i) * H);
  const int64_t chunks = H / 8;
  for (int s0 = 0; s0 < n; s0 += kGroupRows) {
    const int m = n - s0 < kGroupRows ? n - s0 : kGroupRows;
    const __nv_bfloat16* xr[kGroupRows];
    float g[kGroupRows], u[kGroupRows];
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) {
      xr[j] = x + static_cast<int64_t>(rows[off + s0 + (j < m ? j : 0)]) * H;
      g[j] = u[j] = 0.0f;
    }
#pragma unroll 2
    for (int64_t c = lane; c < chunks; c += 32) {
      float wg[8], wu[8];
      bf16x8_to_f32(__ldg(gw + c), wg);
      bf16x8_to_f32(__ldg(uw + c), wu);
#pragma unroll
      for (int j = 0; j < kGroupRows; ++j) {
        if (j >= m) continue;
        float xf[8];
        load_x8<false>(xr[j], c, xf);
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          g[j] += wg[t] * xf[t];
          u[j] += wu[t] * xf[t];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) {
      g[j] = warp_sum(g[j]);
      u[j] = warp_sum(u[j]);
      if (lane == 0 && j < m) {
        const float a = kGeglu ? gelu_tanh_f(g[j]) : g[j] / (1.0f + expf(-g[j]));
        h[static_cast<int64_t>(off + s0 + j) * I + i] = a * u[j];
      }
    }
  }
}

// y[slot, n] = down_e[n] . h[slot]; grid (ceil(H / kMoeWarps), E). down [E, H, I] bf16, h [n_sorted, I]
// f32, y [n_sorted, H] f32.
__global__ void __launch_bounds__(kMoeWarps * 32)
    moe_grouped_down_kernel(const float* __restrict__ h, const int32_t* __restrict__ counts,
                            const int32_t* __restrict__ offsets, const __nv_bfloat16* __restrict__ down, int64_t H,
                            int64_t I, float* __restrict__ y) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = blockIdx.y, o = static_cast<int64_t>(blockIdx.x) * kMoeWarps + warp;
  const int n = counts[e];
  if (n == 0 || o >= H) return;
  const int off = offsets[e];
  const uint4* w = reinterpret_cast<const uint4*>(down + (e * H + o) * I);
  const int64_t chunks = I / 8;
  for (int s0 = 0; s0 < n; s0 += kGroupRows) {
    const int m = n - s0 < kGroupRows ? n - s0 : kGroupRows;
    float acc[kGroupRows];
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) acc[j] = 0.0f;
#pragma unroll 2
    for (int64_t c = lane; c < chunks; c += 32) {
      float wf[8];
      bf16x8_to_f32(__ldg(w + c), wf);
#pragma unroll
      for (int j = 0; j < kGroupRows; ++j) {
        if (j >= m) continue;
        float xf[8];
        load_x8<false>(h + static_cast<int64_t>(off + s0 + j) * I, c, xf);
#pragma unroll
        for (int t = 0; t < 8; ++t) acc[j] += wf[t] * xf[t];
      }
    }
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) {
      acc[j] = warp_sum(acc[j]);
      if (lane == 0 && j < m) y[static_cast<int64_t>(off + s0 + j) * H + o] = acc[j];
    }
  }
}

// The router's choice for one token, by one warp: the softmax over E <= 32 * EPL logits held in registers
// (EPL per lane), then k rounds of a warp argmax (ties: lower index), each removing its pick. Lane j
// keeps the j-th pick; weights are divided by the picks' sum, added in pick order, when renormalize.
// The logits are read past L1 (another block of the same kernel may have written them).
// SHARED: the logits are in this block's shared memory instead.
template <int EPL, bool SHARED = false>
__device__ __forceinline__ void route_row(const float* row, int E, int k, bool renormalize, float* __restrict__ weights,
                                          int32_t* __restrict__ experts, int lane) {
  float p[EPL];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < E ? (SHARED ? row[e] : __ldcg(row + e)) : -INFINITY;
    m = fmaxf(m, p[i]);
  }
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < EPL; ++i) s += lane + 32 * i < E ? expf(p[i] - m) : 0.0f;
  const float inv = 1.0f / warp_sum(s);
#pragma unroll
  for (int i = 0; i < EPL; ++i) p[i] = lane + 32 * i < E ? expf(p[i] - m) * inv : -INFINITY;  // as ops::softmax
  float picked_sum = 0.0f, my_w = 0.0f;
  int my_e = 0;
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = lane + 32 * i;
      if (e < E && (p[i] > bv || bi == 0x7fffffff)) bv = p[i], bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (lane == j) my_w = bv, my_e = bi;
    picked_sum += bv;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      if (lane + 32 * i == bi) p[i] = -INFINITY;
    }
  }
  if (lane < k) {
    weights[lane] = renormalize ? my_w / picked_sum : my_w;
    experts[lane] = my_e;
  }
}

constexpr int kRouteWarps = 4;

// route_row for T tokens, a warp each.
template <int EPL>
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_kernel(const float* __restrict__ logits, int64_t T, int E, int k, bool renormalize,
                     float* __restrict__ weights, int32_t* __restrict__ experts) {
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= T) return;
  route_row<EPL>(logits + t * E, E, k, renormalize, weights + t * k, experts + t * k, lane);
}

// A mixture-of-experts sub-layer's entry for M <= 4 decode rows, in one kernel: the residual add and
// RMSNorm of each block's copy of the rows (norm_rows_to_shared, the add_rms_norm kernel's rounding), the
// router product in f32 (gemv_body, kRouterW warps per expert), and in the block that finishes last the
// router's choice per row (route_row). Block 0 writes the sums (with a delta) and the normed rows [M, H]
// bf16, which the expert products read next. done: a counter at zero, which the last block resets.
// Grid ceil(E / (kMoeWarps / kRouterW)); dynamic shared memory M * H bf16.
constexpr int kRouterW = 2;

template <int M, int EPL>
__global__ void __launch_bounds__(kMoeWarps * 32)
    moe_norm_route_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ delta,
                          __nv_bfloat16* __restrict__ sum, const __nv_bfloat16* __restrict__ weight, float eps,
                          const __nv_bfloat16* __restrict__ router, int64_t E, int64_t H,
                          __nv_bfloat16* __restrict__ normed, float* __restrict__ logits, int k, bool renormalize,
                          float* __restrict__ weights, int32_t* __restrict__ experts, unsigned* done) {
  grid_dependency_wait();
  extern __shared__ uint4 moe_route_smem[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(moe_route_smem);
  norm_rows_to_shared<M, kMoeWarps>(x, delta, sum, weight, eps, H, xs);
  if (blockIdx.x == 0) {
    for (int64_t c = threadIdx.x; c < M * H / 8; c += blockDim.x)
      reinterpret_cast<uint4*>(normed)[c] = moe_route_smem[c];
  }
  gemv_body<M, kRouterW, 4, true, float, kMoeWarps>(xs, router, logits, E, H);
  __threadfence();  // this block's logits, before it counts itself done
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < M)
    route_row<EPL>(logits + warp * E, static_cast<int>(E), k, renormalize, weights + warp * k, experts + warp * k,
                   lane);
  if (threadIdx.x == 0) *done = 0u;
}

// The same entry as one thread-block cluster of kRouteBlocks blocks of kRouteClusterWarps warps (sm_90):
// every block norms its copy of the rows, block q computes the router rows [q R, (q + 1) R), R =
// ceil(E / kRouteBlocks), a warp a row, and writes the logits into block 0's shared memory as well as
// to `logits`; after one cluster barrier block 0 routes from its shared memory. So no fence, counter or
// read back through L2. Each warp issues its first row's first 8 x 32 weight vectors before the block
// norms the rows, so their latency overlaps the norm. (Loading them before the grid wait, as measured
// on the H200 on 2026-12-04, breaks the launch rule that every kernel begins with the wait.)
// Dynamic shared memory: M * H bf16, then M * E floats.
constexpr int kRouteBlocks = 8, kRouteClusterWarps = 16;

template <int M, int EPL>
__global__ void __launch_bounds__(kRouteClusterWarps * 32)
    moe_norm_route_cluster_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ delta,
                                  __nv_bfloat16* __restrict__ sum, const __nv_bfloat16* __restrict__ weight, float eps,
                                  const __nv_bfloat16* __restrict__ router, int64_t E, int64_t H,
                                  __nv_bfloat16* __restrict__ normed, float* __restrict__ logits, int k,
                                  bool renormalize, float* __restrict__ weights, int32_t* __restrict__ experts) {
  grid_dependency_wait();
  namespace cg = cooperative_groups;
  extern __shared__ uint4 moe_route_smem[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(moe_route_smem);
  float* lg = reinterpret_cast<float*>(xs + M * H);  // [M][E], read in block 0
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t chunks = H / 8, per_block = (E + kRouteBlocks - 1) / kRouteBlocks;
  const int64_t row0 = blockIdx.x * per_block;
  constexpr int kFirst = 8;  // vectors a lane loads while the block norms the rows
  uint4 first[kFirst];
  {
    const int64_t e = row0 + warp;
    const bool mine = warp < per_block && e < E;
    const uint4* wr = reinterpret_cast<const uint4*>(router + e * H);
#pragma unroll
    for (int u = 0; u < kFirst; ++u) {
      const int64_t c = lane + 32 * u;
      first[u] = mine && c < chunks ? load_weights16<true>(wr + c) : make_uint4(0, 0, 0, 0);
    }
  }
  norm_rows_to_shared<M, kRouteClusterWarps>(x, delta, sum, weight, eps, H, xs);
  if (blockIdx.x == 0) {
    for (int64_t c = threadIdx.x; c < M * H / 8; c += blockDim.x) reinterpret_cast<uint4*>(normed)[c] = moe_route_smem[c];
  }
  cg::cluster_group cluster = cg::this_cluster();
  float* lg0 = cluster.map_shared_rank(lg, 0);
  for (int64_t j = warp; j < per_block && row0 + j < E; j += kRouteClusterWarps) {
    const int64_t e = row0 + j;
    const uint4* wr = reinterpret_cast<const uint4*>(router + e * H);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    int64_t c0 = lane;  // the warp's first row starts from the vectors already loaded
    if (j == warp) {
#pragma unroll
      for (int u = 0; u < kFirst; ++u) {
        if (lane + 32 * u < chunks) gemv_chunk<M, true>(xs, H, first[u], lane + 32 * u, acc);
      }
      c0 = lane + 32 * kFirst;
    }
    for (int64_t c = c0; c < chunks; c += 32) gemv_chunk<M, true>(xs, H, load_weights16<true>(wr + c), c, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) logits[m * E + e] = v, lg0[m * E + e] = v;
    }
  }
  cluster.sync();  // every block's logits are in block 0's shared memory
  if (blockIdx.x != 0) return;
  if (warp < M)
    route_row<EPL, true>(lg + warp * E, static_cast<int>(E), k, renormalize, weights + warp * k, experts + warp * k,
                         lane);
}

}  // namespace tern::cuda::kernels
