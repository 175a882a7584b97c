// The sampler's nucleus (ops::top_p_mask) on one row: the integer top-p rule of tern/base/draw_weight.h
// without sorting the row, in three launches.
//  1. top_p_hist_kernel (a block per 2,048 ids): each block's histograms of the u64 weights by distance
//     below the max (bins 1/32 logit wide, and 1/32,768 wide within the first).
//  2. top_p_cut_kernel (one block): the bins summed, the bin where the best-first mass reaches the
//     target, that bin's keys gathered into shared memory (the row itself when they do not fit), then
//     histograms over their keys, 1,024 times narrower each pass (at most four), down to the last kept
//     logit; ties at it are kept in id order. Writes the cut.
//  3. top_p_apply_kernel: the row with every id past the cut (or failing min-p) at -inf.
// Integer sums are exact, so the atomics' order does not matter and the kept set is the host's.
#pragma once
#include "tern/backend/cuda/kernels/draw.cuh"

namespace tern::cuda::kernels {

constexpr int kTopPBins = 1024;     // bins of every histogram
constexpr int kTopPThreads = 1024;  // the cut kernel's block
static_assert(kTopPThreads == kTopPBins, "the cut kernel's passes hold one histogram bin per thread");
constexpr int kTopPChunk = 2048;    // ids per block of the histogram and apply kernels (256 threads)
constexpr int kTopPCandidates = 49152;  // keys of the crossing bin held in shared memory (192 KB)

// The cut: keep keys above `key`, and ids <= id of the keys equal to it; ok 0 means the row is outside
// the contract (then it is returned unchanged).
struct TopPCut {
  uint32_t key;
  int32_t ok;
  int64_t id;
};

// The order key of a logit: a larger logit has a larger key; -0 is +0 (they tie as logits).
__device__ __forceinline__ uint32_t top_p_key(float x) {
  uint32_t b = __float_as_uint(x);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float top_p_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The first histograms' bins by distance below the max: coarse bins 1/32 logit wide (the last one
// from 32 logits down), and fine ones 1/32,768 logit wide over coarse bin 0 (-1 outside it), for
// narrow rows (a random-weight checkpoint's logits lie within a fraction of a logit). Both are
// monotone in the logit; (m - q) is scaled by powers of two, so fine >= 0 exactly when coarse is 0.
__device__ __forceinline__ int top_p_coarse_bin(float logit, float max_logit) {
  const float d = fminf(__fmul_rn(__fsub_rn(max_logit, logit), 32.0f), float(kTopPBins - 1));
  return d > 0.0f ? static_cast<int>(d) : 0;
}
__device__ __forceinline__ int top_p_fine_bin(float logit, float max_logit) {
  const float d = __fmul_rn(__fsub_rn(max_logit, logit), 32768.0f);
  return d < float(kTopPBins) ? (d > 0.0f ? static_cast<int>(d) : 0) : -1;
}

// hists[block][0][bin], hists[block][1][bin]: the weights of the block's ids [block * kTopPChunk, ...)
// by coarse and by fine bin.
__global__ void __launch_bounds__(256) top_p_hist_kernel(const float* __restrict__ logits, int64_t n,
                                                         const float* __restrict__ max_ptr,
                                                         uint64_t* __restrict__ hists) {
  grid_dependency_wait();
  __shared__ uint64_t hist[2 * kTopPBins];
  for (int b = threadIdx.x; b < 2 * kTopPBins; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  const float m = *max_ptr;
  const int64_t lo = int64_t(blockIdx.x) * kTopPChunk;
  if (isfinite(m)) {
    float q[kTopPChunk / 256];
#pragma unroll
    for (int j = 0; j < kTopPChunk / 256; ++j) {
      const int64_t i = lo + threadIdx.x + j * 256;
      q[j] = i < n ? logits[i] : -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < kTopPChunk / 256; ++j) {
      const uint64_t w = draw_weight_dev(q[j], m);
      if (w == 0) continue;
      atomicAdd(reinterpret_cast<unsigned long long*>(&hist[top_p_coarse_bin(q[j], m)]), w);
      const int f = top_p_fine_bin(q[j], m);
      if (f >= 0) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[kTopPBins + f]), w);
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 2 * kTopPBins; b += blockDim.x) hists[int64_t(blockIdx.x) * 2 * kTopPBins + b] = hist[b];
}

// Block-wide: the bin (thread index) where above + the inclusive prefix of this thread's h reaches
// target, i.e. above + before < target <= above + before + h; its before and h go to *at and *mass.
// Returns the bin, or -1 when no bin does (only for rows outside the contract).
__device__ __forceinline__ int top_p_crossing(uint64_t h, uint64_t above, uint64_t target, uint64_t* at,
                                              uint64_t* mass) {
  __shared__ int s_bin;
  if (threadIdx.x == 0) s_bin = -1;
  uint64_t all;
  const uint64_t before = above + block_exclusive_u64(h, &all);  // syncs after s_bin's reset
  if (before < target && target <= before + h) s_bin = threadIdx.x, *at = before, *mass = h;
  __syncthreads();
  const int bin = s_bin;
  __syncthreads();  // every thread has read s_bin before the next call resets it
  return bin;
}

// each(f) calls f(key) for every id of the crossing bin (a source: the gathered keys or the row).
// Narrows the key range [lo, hi] to one key: bin (hi - key) * 1024 / range, best first; above and
// mass follow the chosen bins. False if a pass finds no crossing bin (a row outside the contract).
template <typename Each>
__device__ bool top_p_narrow(Each each, float m, uint64_t target, uint64_t* hist, uint32_t& lo, uint32_t& hi,
                             uint64_t& above, uint64_t& mass) {
  __shared__ uint64_t s_at, s_mass;
  for (int pass = 0; lo < hi && pass < 5; ++pass) {
    const uint64_t range = uint64_t(hi) - lo + 1;
    __syncthreads();  // everyone has read the previous histogram
    hist[threadIdx.x] = 0;
    __syncthreads();
    each([&](uint32_t k) {
      if (k < lo || k > hi) return;
      const uint64_t w = draw_weight_dev(top_p_value(k), m);
      if (w != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[(uint64_t(hi - k) << 10) / range]), w);
    });
    __syncthreads();
    const int b = top_p_crossing(hist[threadIdx.x], above, target, &s_at, &s_mass);
    if (b < 0) return false;
    above = s_at, mass = s_mass;
    const uint64_t d_lo = (uint64_t(b) * range + 1023) >> 10, d_hi = ((uint64_t(b + 1) * range + 1023) >> 10) - 1;
    const uint32_t top = hi;
    hi = top - static_cast<uint32_t>(d_lo), lo = top - static_cast<uint32_t>(d_hi);
  }
  return lo == hi;
}

// f(q, valid) for ids t, t + kTopPThreads, ... of the row (t this thread), 8 loads in flight per
// thread; valid is false past n (every thread calls f equally often).
template <typename F>
__device__ __forceinline__ void top_p_row_walk(const float* __restrict__ logits, int64_t n, F&& f) {
  constexpr int kLoads = 8;
  for (int64_t base = 0; base < n; base += kLoads * kTopPThreads) {
    float q[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + threadIdx.x + j * kTopPThreads;
      q[j] = i < n ? logits[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) f(q[j], base + threadIdx.x + j * kTopPThreads < n);
  }
}

// One block of kTopPThreads. hists: blocks histograms of top_p_hist_kernel. fraction:
// top_p_fraction(top_p). Dynamic shared memory: kTopPCandidates * 4 bytes.
__global__ void __launch_bounds__(kTopPThreads)
    top_p_cut_kernel(const float* __restrict__ logits, int64_t n, const float* __restrict__ max_ptr,
                     const uint64_t* __restrict__ hists, int blocks, uint64_t fraction, TopPCut* __restrict__ cut) {
  grid_dependency_wait();
  extern __shared__ uint32_t top_p_cands[];  // the keys of the crossing bin's ids, in no order
  __shared__ uint64_t hist[kTopPBins];
  __shared__ uint64_t s_at, s_mass;
  __shared__ int s_count;
  const int t = threadIdx.x;
  const float m = *max_ptr;
  if (!isfinite(m)) {
    if (t == 0) *cut = TopPCut{0, 0, 0};
    return;
  }
  uint64_t h = 0, hf = 0;
#pragma unroll 8
  for (int g = 0; g < blocks; ++g) {
    h += hists[int64_t(g) * 2 * kTopPBins + t];
    hf += hists[int64_t(g) * 2 * kTopPBins + kTopPBins + t];
  }
  uint64_t total;
  block_exclusive_u64(h, &total);
  uint64_t target = __umul64hi(fraction, total) + (fraction * total != 0 ? 1 : 0);  // top_p_target
  target = target > 0 ? target : 1;
  int first = top_p_crossing(h, 0, target, &s_at, &s_mass);
  // A crossing in coarse bin 0 is found again among its fine bins (nothing lies above coarse bin 0).
  const bool fine = first == 0;
  if (fine) first = top_p_crossing(hf, 0, target, &s_at, &s_mass);
  auto in_first = [&](float q) { return fine ? top_p_fine_bin(q, m) == first : top_p_coarse_bin(q, m) == first; };
  if (first < 0) {
    if (t == 0) *cut = TopPCut{0, 0, 0};
    return;
  }
  uint64_t above = s_at, mass = s_mass;
  // Gather the crossing bin's ids (bins are monotone in the logit, so its keys are contiguous).
  if (t == 0) s_count = 0;
  __syncthreads();
  uint32_t lo = 0xffffffffu, hi = 0;
  top_p_row_walk(logits, n, [&](float q, bool valid) {
    if (!valid || !in_first(q)) return;
    const uint32_t k = top_p_key(q);
    lo = min(lo, k), hi = max(hi, k);
    const int slot = atomicAdd(&s_count, 1);
    if (slot < kTopPCandidates) top_p_cands[slot] = k;
  });
  {
    __shared__ uint32_t s_lo, s_hi;
    lo = __reduce_min_sync(0xffffffffu, lo), hi = __reduce_max_sync(0xffffffffu, hi);
    if (t == 0) s_lo = 0xffffffffu, s_hi = 0;
    __syncthreads();
    if ((t & 31) == 0) atomicMin(&s_lo, lo), atomicMax(&s_hi, hi);
    __syncthreads();
    lo = s_lo, hi = s_hi;
  }
  const int count = s_count;
  const bool held = count <= kTopPCandidates;
  auto from_cands = [&](auto&& f) {
    for (int c = t; c < count; c += kTopPThreads) f(top_p_cands[c]);
  };
  auto from_row = [&](auto&& f) {
    top_p_row_walk(logits, n, [&](float q, bool valid) {
      if (valid) f(top_p_key(q));
    });
  };
  const bool found = held ? top_p_narrow(from_cands, m, target, hist, lo, hi, above, mass)
                          : top_p_narrow(from_row, m, target, hist, lo, hi, above, mass);
  // The ties at the cut weigh w each; the first ceil((target - above) / w) of them in id order are kept.
  const uint64_t w = found ? draw_weight_dev(top_p_value(lo), m) : 0;
  if (w == 0) {
    if (t == 0) *cut = TopPCut{0, 0, 0};
    return;
  }
  const uint64_t ties = mass / w, keep = (target - above + w - 1) / w;
  int64_t id_cut = n;
  if (keep < ties) {  // the keep-th lowest id among the ties, in one ordered pass over the row
    __shared__ int s_warps[kTopPThreads / 32];
    __shared__ int64_t s_id;
    const int lane = t & 31, warp = t >> 5;
    int64_t seen = 0;
    for (int64_t base = 0; base < n; base += kTopPThreads) {
      const int64_t i = base + t;
      const bool tie = i < n && top_p_key(logits[i]) == lo;
      const unsigned bal = __ballot_sync(0xffffffffu, tie);
      if (lane == 0) s_warps[warp] = __popc(bal);
      __syncthreads();
      int64_t before = seen;
      int in_block = 0;
      for (int v = 0; v < kTopPThreads / 32; ++v) {
        before += v < warp ? s_warps[v] : 0;
        in_block += s_warps[v];
      }
      if (tie && before + __popc(bal & ((1u << lane) - 1u)) == static_cast<int64_t>(keep) - 1) s_id = i;
      seen += in_block;
      __syncthreads();
      if (seen >= static_cast<int64_t>(keep)) break;
    }
    id_cut = s_id;
  }
  if (t == 0) *cut = TopPCut{lo, 1, id_cut};
}

// out[i] = logits[i] when kept (use_p: by the cut), and !(logits[i] - max < min_gap); else -inf. A
// cut with ok 0 returns the row. Blocks of 256 threads, kTopPChunk ids each.
__global__ void __launch_bounds__(256) top_p_apply_kernel(const float* __restrict__ logits, int64_t n,
                                                          const float* __restrict__ max_ptr,
                                                          const TopPCut* __restrict__ cut_ptr, bool use_p,
                                                          float min_gap, float* __restrict__ out) {
  grid_dependency_wait();
  const float m = *max_ptr;
  const TopPCut cut = use_p ? *cut_ptr : TopPCut{0, 1, n};
  const bool pass = !isfinite(m) || !cut.ok;
  const int64_t lo = int64_t(blockIdx.x) * kTopPChunk;
#pragma unroll
  for (int j = 0; j < kTopPChunk / 256; ++j) {
    const int64_t i = lo + threadIdx.x + j * 256;
    if (i >= n) break;
    const float q = logits[i];
    const uint32_t k = top_p_key(q);
    const bool kept = !use_p || k > cut.key || (k == cut.key && i <= cut.id);
    out[i] = pass || (kept && !(__fsub_rn(q, m) < min_gap)) ? q : -INFINITY;
  }
}

}  // namespace tern::cuda::kernels
