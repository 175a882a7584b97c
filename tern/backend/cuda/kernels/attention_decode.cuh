// Flash-decoding on tensor cores: a block owns one kv head of one batch row and one key split; its
// 16 mma rows are the query rows that read that kv head (G query heads x Lq queries, <= 16), so K/V
// are read once per kv head, not once per query head. The 4 warps walk disjoint key tiles with their
// own online softmax, merge in shared memory, and write either the output (one split) or a partial
// (acc, max, sum) that attention_combine_kernel merges -- or, launched as one thread-block cluster per
// kv head, merge the splits through distributed shared memory. HD is the q/k head dim, HDV the value
// dims one launch produces (HD, or a 256-wide slice of Gemma 4's 512-dim values; each slice recomputes
// the scores).
#pragma once
#include <cooperative_groups.h>

#include "tern/backend/cuda/kernels/attention_flash.cuh"

namespace tern::cuda::kernels {

struct DecodeArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;       // rows of HDV elements at a stride of os
  float* partial;  // [n_splits, B * Hq * Lq, HDV + 2]
  int64_t os;
  int64_t Hq, Hkv, Lq, Lk;
  int64_t qs[3], ks[3], vs[3];
  float scale, softcap;
  bool causal;
  int64_t q_offset, window;
  const int32_t* kv_len;
  int64_t fresh_keys;  // ops::AttentionMask::fresh_keys: >= 0 lets a warp stage older keys before the grid wait
  int n_splits;
  unsigned* counters;  // [B * Hkv] at zero, or nullptr: the last split of a kv head merges the partials
  bool cluster;        // the splits of a kv head are one cluster (n_splits <= kDecodeClusterMax): see below
};

// The most splits a cluster merge takes (the portable cluster size), and the floats of shared memory
// it needs past decode_merge's scratch: each block's merged rows [16][HDV + 2] and the splits' weights.
constexpr int kDecodeClusterMax = kClusterMaxBlocks;
template <int HDV>
constexpr int decode_cluster_floats() {
  return 16 * (HDV + 2) + kDecodeClusterMax * 16;
}

// Copies `rows` rows (HD elements, row stride `stride`) into smem rows of HD + 8 using one warp; rows
// at or past `valid` are zero.
template <typename T, int HD>
__device__ __forceinline__ void warp_load_tile(T* smem, const T* g, int64_t stride, int rows, int valid, int lane) {
  constexpr int kPerRow = HD / 8;
#pragma unroll 4
  for (int idx = lane; idx < rows * kPerRow; idx += 32) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < valid) val = *reinterpret_cast<const uint4*>(g + r * stride + c);
    *reinterpret_cast<uint4*>(smem + r * (HD + 8) + c) = val;
  }
}

// warp_load_tile with cp.async (zero-fill past `valid`) of rows [r0, rows); the caller commits and waits.
template <typename T, int HD>
__device__ __forceinline__ void warp_load_tile_async(T* smem, const T* g, int64_t stride, int rows, int valid,
                                                     int lane, int r0 = 0) {
  constexpr int kPerRow = HD / 8;
#pragma unroll 4
  for (int idx = r0 * kPerRow + lane; idx < rows * kPerRow; idx += 32) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * 8;
    const bool in = r < valid;
    const T* src = in ? g + r * stride + c : g;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem + r * (HD + 8) + c)),
                 "l"(src), "r"(in ? 16 : 0));
  }
}

// One element of a split's partial for the combine kernels: acc at d; at d == 0 also the max
// (decode_merge's log2 domain, stored in the natural-log domain the combines read) and the sum.
template <int HD>
__device__ __forceinline__ void store_partial(float* pp, int d, float acc, float M, float L) {
  pp[d] = acc;
  if (d == 0) {
    pp[HD] = M == -INFINITY ? -INFINITY : M * 0.6931471805599453f;
    pp[HD + 1] = L;
  }
}

// The online-softmax step of one warp's BN-key tile: the scores s (mma accumulators of the 16 query
// rows, key n0 + 8 i + 2 t + (e & 1) in s[i][e]) become probabilities (log2 domain, scaled and
// soft-capped, masked(rr, j) hiding key j from row g + 8 rr), and (o, row_m, row_l) are rescaled.
// I: the key index type (int where the caller knows keys fit 32 bits: cheaper masks).
template <int HD, int BN, typename I, typename Masked>
__device__ __forceinline__ void decode_softmax(float (&s)[BN / 8][4], I n0, float scale, float softcap,
                                               float (&o)[HD / 8][4], float (&row_m)[2], float (&row_l)[2],
                                               Masked masked) {
  const int t = threadIdx.x & 3;
  float tile_max[2] = {-INFINITY, -INFINITY};
  if (softcap > 0.0f) {  // uniform: decided once per tile, not per score
    const float inv = scale / softcap, out = softcap * kLog2e;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = out * tanhf(s[i][e] * inv);
  } else {
    const float k = scale * kLog2e;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] *= k;
  }
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int rr = e >> 1;
      const I j = n0 + i * 8 + 2 * t + (e & 1);
      if (masked(rr, j)) s[i][e] = -INFINITY;
      tile_max[rr] = fmaxf(tile_max[rr], s[i][e]);
    }
  }
  float corr[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    tile_max[rr] = fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 1));
    tile_max[rr] = fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 2));
    const float m_new = fmaxf(row_m[rr], tile_max[rr]);
    corr[rr] = m_new == -INFINITY ? 1.0f : fast_exp2(row_m[rr] - m_new);
    row_m[rr] = m_new;
  }
  // A row that has seen no key yet subtracts 0: its scores are all -inf, and ex2 of -inf is 0.
  const float m_sub[2] = {row_m[0] == -INFINITY ? 0.0f : row_m[0], row_m[1] == -INFINITY ? 0.0f : row_m[1]};
  float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int rr = e >> 1;
      const float p = fast_exp2(s[i][e] - m_sub[rr]);
      s[i][e] = p;
      tile_sum[rr] += p;
    }
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) row_l[rr] = row_l[rr] * corr[rr] + tile_sum[rr];
  // Once the maxima settle most tiles skip these. Each half votes alone: rows g + 8 that hold no query
  // (G <= 8 in the quantized read: their scores are all 0) rescale at their first tile only.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (__any_sync(0xffffffffu, corr[rr] != 1.0f)) {
#pragma unroll
      for (int i = 0; i < HD / 8; ++i) {
        o[i][2 * rr] *= corr[rr];
        o[i][2 * rr + 1] *= corr[rr];
      }
    }
  }
}

// One warp's flash-decoding step over BN keys [n0, n0 + BN) held in shared memory (K rows of HD + 8
// elements, V rows of HDV + 8): the scores of the 16 mma query rows in sq (log2 domain, scaled and soft-capped), the
// mask, the online-softmax update of (row_m, row_l) and P V accumulated into o. The lane's query rows
// are g and g + 8 (g = lane / 4); masked(rr, j) says whether key j is hidden from row g + 8 * rr.
template <typename T, int HD, int BN, int HDV = HD, typename I, typename Masked>
__device__ __forceinline__ void decode_tile(const T* sq, const T* sk, const T* sv, I n0, float scale,
                                            float softcap, float (&o)[HDV / 8][4], float (&row_m)[2], float (&row_l)[2],
                                            Masked masked) {
  constexpr int kVStride = HDV + 8;
  const int lane = threadIdx.x & 31;
  float s[BN / 8][4];
  warp_qk<T, HD, BN>(sq, sk, s);

  decode_softmax<HDV, BN>(s, n0, scale, softcap, o, row_m, row_l, masked);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    uint32_t pa[4];
    pa[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
    pa[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
    pa[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
    for (int dd = 0; dd < HDV / 16; ++dd) {
      const int mi = lane >> 3, r = lane & 7;
      uint32_t b0, b1, b2, b3;
      ldmatrix_x4_trans(b0, b1, b2, b3, sv + (kk * 16 + r + 8 * (mi & 1)) * kVStride + dd * 16 + 8 * (mi >> 1));
      mma16816<T>(o[2 * dd], pa, b0, b1);
      mma16816<T>(o[2 * dd + 1], pa, b2, b3);
    }
  }
}

// Merges the kFlashWarps warps' (row_m, row_l, o) of the block's first R mma rows through `scratch`
// (>= (kFlashWarps * 16 * (2 + HD)) floats, free to overwrite: the caller synchronises before) and
// calls emit(r, d, acc, M, L) once per row r < R and element d: acc unnormalised, M the row's max in
// the log2 domain (-INFINITY when it saw no key), L its sum. col(c) is the element that accumulator
// column c (= 8 n-tile + column within it) holds; the identity unless the caller permuted V's columns.
struct IdentityCols {
  __device__ __forceinline__ int operator()(int c) const { return c; }
};

template <int HD, typename Emit, typename Col = IdentityCols>
__device__ __forceinline__ void decode_merge(float* scratch, int R, const float (&o)[HD / 8][4], float (&row_m)[2],
                                             float (&row_l)[2], Emit emit, Col col = Col{}) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    row_l[rr] += __shfl_xor_sync(0xffffffffu, row_l[rr], 1);
    row_l[rr] += __shfl_xor_sync(0xffffffffu, row_l[rr], 2);
  }
  float* wm = scratch;
  float* wl = wm + kFlashWarps * 16;
  float* wacc = wl + kFlashWarps * 16;  // [warp][16][HD]
  if (t == 0) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      wm[warp * 16 + g + 8 * rr] = row_m[rr];
      wl[warp * 16 + g + 8 * rr] = row_l[rr];
    }
  }
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) {
    const int d = i * 8 + 2 * t;
    wacc[(warp * 16 + g) * HD + d] = o[i][0];
    wacc[(warp * 16 + g) * HD + d + 1] = o[i][1];
    wacc[(warp * 16 + g + 8) * HD + d] = o[i][2];
    wacc[(warp * 16 + g + 8) * HD + d + 1] = o[i][3];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < R * HD; idx += blockDim.x) {
    const int r = idx / HD, d = idx % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kFlashWarps; ++w) M = fmaxf(M, wm[w * 16 + r]);
    float L = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kFlashWarps; ++w) {
      const float f = wm[w * 16 + r] == -INFINITY ? 0.0f : exp2f(wm[w * 16 + r] - M);
      L += wl[w * 16 + r] * f;
      acc += wacc[(w * 16 + r) * HD + d] * f;
    }
    emit(r, col(d), acc, M, L);
  }
}

// The last split of a kv head to finish merges the n_splits partials of the block's R output rows
// [row0, row0 + R) (rows_total rows of HDV + 2 floats per split; other blocks wrote them, so they are
// read from L2) into out (rows at a stride of os). scratch: >= 2 * 64 * 16 floats.
template <typename T, int HDV>
__device__ __forceinline__ void merge_split_partials(const float* partial, int n_splits, int64_t rows_total,
                                                     int64_t row0, int R, float* scratch, T* out, int64_t os) {
  float* w = scratch;  // [split][16]: first the split's max, then its weight in the merged sum
  float* l = w + 64 * 16;
  for (int idx = threadIdx.x; idx < n_splits * R; idx += blockDim.x) {
    const int s = idx / R, r = idx % R;
    const float* pp = partial + (s * rows_total + row0 + r) * (HDV + 2);
    w[s * 16 + r] = __ldcg(pp + HDV);
    l[s * 16 + r] = __ldcg(pp + HDV + 1);
  }
  __syncthreads();
  if (threadIdx.x < R) {
    const int r = threadIdx.x;
    float M = -INFINITY, L = 0.0f;
    for (int s = 0; s < n_splits; ++s) M = fmaxf(M, w[s * 16 + r]);
    for (int s = 0; s < n_splits; ++s) {
      const float f = w[s * 16 + r] == -INFINITY ? 0.0f : expf(w[s * 16 + r] - M);
      w[s * 16 + r] = f;
      L += l[s * 16 + r] * f;
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int s = 0; s < n_splits; ++s) w[s * 16 + r] *= inv;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < R * (HDV / 2); idx += blockDim.x) {  // float2: rows of HDV + 2 are 8-byte aligned
    const int r = idx / (HDV / 2), d = (idx % (HDV / 2)) * 2;
    const float* pp = partial + (row0 + r) * (HDV + 2) + d;
    float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll 8
    for (int s = 0; s < n_splits; ++s) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(pp + s * rows_total * (HDV + 2)));
      const float f = w[s * 16 + r];
      acc.x += f * v.x;
      acc.y += f * v.y;
    }
    T* o = out + (row0 + r) * os + d;
    o[0] = from_f32<T>(acc.x);
    o[1] = from_f32<T>(acc.y);
  }
}

// The merge of a kv head's S splits when they run as one thread-block cluster (S blocks along x): each
// block merges its warps (decode_merge) into its own `part` [16][HDV + 2] (acc, then the row's max in
// the log2 domain and its sum); after a cluster barrier, block q writes output dims [q c, (q + 1) c),
// c = ceil(HDV / S), of every row from all S parts (distributed shared memory), and a second barrier
// keeps each part alive until the cluster has read it. No partials in global memory, no fence, no
// counter: the last-block merge's round trips through L2 become two cluster barriers. Each thread issues
// its S remote loads together (unrolled over kDecodeClusterMax, predicated), so a read of the peers costs
// one distributed-shared-memory round trip, not S in series.
template <typename T, int HDV, typename Row>
__device__ __forceinline__ void decode_cluster_merge(float* part, float* scratch, int R, int S,
                                                     const float (&o)[HDV / 8][4], float (&row_m)[2],
                                                     float (&row_l)[2], T* out, int64_t os, Row out_row) {
  namespace cg = cooperative_groups;
  constexpr int kRow = HDV + 2;  // even: a row's (max, sum) pair is 8-byte aligned
  float* weight = part + 16 * kRow;  // [split][16]: each split's share of a row
  decode_merge<HDV>(scratch, R, o, row_m, row_l, [&](int r, int d, float acc, float M, float L) {
    part[r * kRow + d] = acc;
    if (d == 0) part[r * kRow + HDV] = M, part[r * kRow + HDV + 1] = L;
  });
  cg::cluster_group cluster = cg::this_cluster();
  const float* peer[kDecodeClusterMax];
#pragma unroll
  for (int s = 0; s < kDecodeClusterMax; ++s) peer[s] = cluster.map_shared_rank(part, s < S ? s : 0);
  cluster.sync();  // release / acquire: every block's part is visible to the cluster
  if (threadIdx.x < R) {
    const int r = threadIdx.x;
    float2 ml[kDecodeClusterMax];
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s)
      ml[s] = s < S ? *reinterpret_cast<const float2*>(peer[s] + r * kRow + HDV) : make_float2(-INFINITY, 0.0f);
    float M = -INFINITY, L = 0.0f;
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s) M = fmaxf(M, ml[s].x);
    float f[kDecodeClusterMax];
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s) {
      f[s] = ml[s].x == -INFINITY ? 0.0f : exp2f(ml[s].x - M);
      L += ml[s].y * f[s];
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s)
      if (s < S) weight[s * 16 + r] = f[s] * inv;
  }
  __syncthreads();
  const int c = (HDV + S - 1) / S, d0 = static_cast<int>(cluster.block_rank()) * c;
  for (int idx = threadIdx.x; idx < R * c; idx += blockDim.x) {
    const int r = idx / c, d = d0 + idx % c;
    if (d >= HDV) continue;
    float v[kDecodeClusterMax];
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s) v[s] = s < S ? peer[s][r * kRow + d] : 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < kDecodeClusterMax; ++s)
      if (s < S) acc += weight[s * 16 + r] * v[s];
    out[out_row(r) * os + d] = from_f32<T>(acc);
  }
  cluster_release_peers();  // the output stores above consumed every peer read
}

// The keys of a block (split, kv head, batch row b): the row's length lk (Lk, or kv_len[b] when
// smaller), the union over its rows of their visible keys [lo_min, hi_max) (query 0 has the lowest window
// start, Lq - 1 the highest causal end), and the split's share [start, stop) of whole BN-key tiles.
// Key positions fit 32 bits (a context is far below 2^31 keys), so the keys, their masks and the split's
// share take 32-bit arithmetic: one unsigned division instead of a 64-bit division's call.
struct DecodeKeys {
  int lk, hi_max, start, stop;
};
__device__ __forceinline__ int decode_lo_min(const DecodeArgs& a) {
  return a.window > 0 ? max(0, static_cast<int>(a.q_offset - a.window + 1)) : 0;
}
template <int BN>
__device__ __forceinline__ DecodeKeys decode_keys(const DecodeArgs& a, int split, int b) {
  DecodeKeys r;
  r.lk = static_cast<int>(a.Lk);
  if (a.kv_len) r.lk = min(r.lk, a.kv_len[b]);
  const int lo_min = decode_lo_min(a);
  r.hi_max = a.causal ? min(r.lk, static_cast<int>(a.Lq + a.q_offset)) : r.lk;
  const unsigned span = r.hi_max > lo_min ? static_cast<unsigned>(r.hi_max - lo_min) : 0u;
  const unsigned n = static_cast<unsigned>(a.n_splits);
  const int chunk = static_cast<int>(((span + n - 1) / n + BN - 1) / BN * BN);
  r.start = lo_min + chunk * split;
  r.stop = min(r.hi_max, r.start + chunk);
  return r;
}

// The smem of a warp's K/V tiles (per stage: K tile, then V tile), after the block's 16 query rows.
template <typename T, int HD, int BN, int STAGES, int HDV>
__device__ __forceinline__ T* decode_warp_tiles(unsigned char* smem, int warp) {
  constexpr int kStride = HD + 8, kTile = BN * (kStride + HDV + 8);
  return reinterpret_cast<T*>(smem) + 16 * kStride + warp * STAGES * kTile;
}

// Before the grid wait, when the read promises which keys are old (a.fresh_keys >= 0, STAGES 2): each
// warp issues the cp.async of the rows of its first K/V tile that earlier work wrote (below lk -
// fresh_keys), so their DRAM latency overlaps the previous kernel's tail; the kernel commits them with the
// rest of that tile. Reads only kv_len and those keys, which the promise covers. Returns the rows issued.
template <typename T, int HD, int BN, int STAGES, int HDV>
__device__ __forceinline__ int decode_stage_before_wait(const DecodeArgs& a) {
  if constexpr (STAGES != 2) {
    return 0;
  } else {
    if (a.fresh_keys < 0) return 0;
    extern __shared__ __align__(16) unsigned char decode_smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int b = blockIdx.z;
    const DecodeKeys r = decode_keys<BN>(a, blockIdx.x, b);
    const int first = r.start + warp * BN;
    const int old_end = min(r.stop, r.lk - static_cast<int>(a.fresh_keys));
    if (first >= old_end) return 0;
    const int rows = min(BN, old_end - first);
    T* sk = decode_warp_tiles<T, HD, BN, STAGES, HDV>(decode_smem, warp);
    const int hk = blockIdx.y;
    const T* kg = static_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[1] + first * a.ks[2];
    const T* vg = static_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[1] + first * a.vs[2];
    warp_load_tile_async<T, HD>(sk, kg, a.ks[2], rows, rows, lane);
    warp_load_tile_async<T, HDV>(sk + BN * (HD + 8), vg, a.vs[2], rows, rows, lane);
    return rows;
  }
}

// STAGES 2: each warp's next K/V tile is in flight (cp.async) while the current one is read; 1: loaded
// synchronously (for wide heads, whose double buffers would cost occupancy).
template <typename T, int HD, int BN, int STAGES, int HDV = HD>
__global__ void __launch_bounds__(kFlashWarps * 32) attention_decode_kernel(DecodeArgs a) {
  const int early = decode_stage_before_wait<T, HD, BN, STAGES, HDV>(a);
  grid_dependency_wait();
  extern __shared__ __align__(16) unsigned char decode_smem[];
  constexpr int kStride = HD + 8, kVOff = BN * kStride, kTile = BN * (kStride + HDV + 8);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  // Head counts and query rows in 32 bits: their divisions are a few instructions, not a 64-bit call.
  const int G = static_cast<int>(a.Hq) / static_cast<int>(a.Hkv), Lq = static_cast<int>(a.Lq);
  const int R = G * Lq;  // <= 16

  T* sq = reinterpret_cast<T*>(decode_smem);
  T* tiles = decode_warp_tiles<T, HD, BN, STAGES, HDV>(decode_smem, warp);

  const DecodeKeys keys = decode_keys<BN>(a, split, b);
  // Query rows r = gi * Lq + i for query head hk * G + gi.
  for (int idx = threadIdx.x; idx < 16 * (HD / 8); idx += blockDim.x) {
    const int r = idx / (HD / 8), c = (idx % (HD / 8)) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < R) {
      const int h = hk * G + r / Lq, i = r % Lq;
      const T* qp = static_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
      val = *reinterpret_cast<const uint4*>(qp + c);
    }
    *reinterpret_cast<uint4*>(sq + r * kStride + c) = val;
  }

  const int lk = keys.lk, hi_max = keys.hi_max, start = keys.start, stop = keys.stop;
  const int q_offset = static_cast<int>(a.q_offset);
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int r = g + 8 * rr;
    const int i = r < R ? r % Lq : 0;
    row_hi[rr] = r >= R ? 0 : a.causal ? min(lk, i + q_offset + 1) : lk;
    row_lo[rr] = a.window > 0 ? max(0, i + q_offset - static_cast<int>(a.window) + 1) : 0;
  }
  __syncthreads();

  const T* kg = static_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[1];
  const T* vg = static_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[1];
  float o[HDV / 8][4];
#pragma unroll
  for (int i = 0; i < HDV / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};

  // Keys past hi_max (<= kv_len) may be uninitialised storage (a compiled step reads a span of the
  // cache beyond its length): zeros are loaded there so masked keys cannot bring NaN into P V.
  auto masked = [&](int rr, int j) { return j < row_lo[rr] || j >= row_hi[rr] || j >= stop; };
  const int first = start + warp * BN, step = kFlashWarps * BN;
  if constexpr (STAGES == 2) {
    auto issue = [&](int n0, int buf, int r0) {  // rows [r0, BN) of the tile at n0
      const int valid = min(BN, hi_max - n0);
      T* sk = tiles + buf * kTile;
      warp_load_tile_async<T, HD>(sk, kg + n0 * a.ks[2], a.ks[2], BN, valid, lane, r0);
      warp_load_tile_async<T, HDV>(sk + kVOff, vg + n0 * a.vs[2], a.vs[2], BN, valid, lane, r0);
    };
    if (first < stop) issue(first, 0, early);  // its first `early` rows are in flight since before the wait
    cp_async_commit();
    int buf = 0;
    for (int n0 = first; n0 < stop; n0 += step, buf ^= 1) {
      if (n0 + step < stop) issue(n0 + step, buf ^ 1, 0);
      cp_async_commit();
      cp_async_wait<1>();
      __syncwarp();
      const T* sk = tiles + buf * kTile;
      decode_tile<T, HD, BN, HDV>(sq, sk, sk + kVOff, n0, a.scale, a.softcap, o, row_m, row_l, masked);
      __syncwarp();  // the buffer is refilled two tiles on
    }
    cp_async_wait<0>();
  } else {
    T* sk = tiles;
    T* sv = tiles + kVOff;
    for (int n0 = first; n0 < stop; n0 += step) {
      const int valid = min(BN, hi_max - n0);
      warp_load_tile<T, HD>(sk, kg + n0 * a.ks[2], a.ks[2], BN, valid, lane);
      warp_load_tile<T, HDV>(sv, vg + n0 * a.vs[2], a.vs[2], BN, valid, lane);
      __syncwarp();
      decode_tile<T, HD, BN, HDV>(sq, sk, sv, n0, a.scale, a.softcap, o, row_m, row_l, masked);
      __syncwarp();
    }
  }

  __syncthreads();  // every warp is done with its K/V tiles: reuse that smem
  float* scratch = reinterpret_cast<float*>(decode_smem + 16 * kStride * sizeof(T));
  const int64_t rows_total = static_cast<int64_t>(gridDim.z) * a.Hq * a.Lq;
  auto out_row = [&](int r) {
    const int h = hk * G + r / Lq, i = r % Lq;
    return (static_cast<int64_t>(b) * a.Hq + h) * Lq + i;
  };
  if constexpr (HDV <= 128) {
    if (a.cluster) {
      decode_cluster_merge<T, HDV>(scratch + kFlashWarps * 16 * (2 + HDV), scratch, R, a.n_splits, o, row_m, row_l,
                                   static_cast<T*>(a.out), a.os, out_row);
      return;
    }
  }
  decode_merge<HDV>(scratch, R, o, row_m, row_l, [&](int r, int d, float acc, float M, float L) {
    const int64_t row = out_row(r);
    if (a.n_splits == 1) {
      static_cast<T*>(a.out)[row * a.os + d] = from_f32<T>(L > 0.0f ? acc / L : 0.0f);
    } else {
      store_partial<HDV>(a.partial + (static_cast<int64_t>(split) * rows_total + row) * (HDV + 2), d, acc, M, L);
    }
  });
  if (a.n_splits == 1 || !a.counters) return;
  __shared__ bool last;
  __threadfence();  // this block's partial, before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* c = a.counters + static_cast<int64_t>(b) * a.Hkv + hk;
    last = atomicAdd(c, 1u) == static_cast<unsigned>(a.n_splits - 1);
    if (last) *c = 0u;  // every split has counted: ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  merge_split_partials<T, HDV>(a.partial, a.n_splits, rows_total, (static_cast<int64_t>(b) * a.Hq + hk * G) * Lq, R,
                               scratch, static_cast<T*>(a.out), a.os);
}

}  // namespace tern::cuda::kernels
