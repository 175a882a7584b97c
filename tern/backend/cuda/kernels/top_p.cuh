// The sampler's nucleus (ops::top_p_mask) on one row, in one block: the integer top-p rule of
// tern/base/draw_weight.h without sorting the row. A histogram of the u64 weights by distance below
// the max (bins 1/32 logit wide) finds the bin where the best-first mass reaches the target; then
// histograms over that bin's key range, 1,024 times narrower each pass (at most four), find the last
// kept logit. Ties at it are kept in id order. Integer sums are exact, so the atomics' order does not
// matter and the kept set is the host's.
#pragma once
#include "tern/backend/cuda/kernels/draw.cuh"

namespace tern::cuda::kernels {

constexpr int kTopPThreads = 1024;  // also the number of bins of every pass

// The order key of a logit: a larger logit has a larger key; -0 is +0 (they tie as logits).
__device__ __forceinline__ uint32_t top_p_key(float x) {
  uint32_t b = __float_as_uint(x);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float top_p_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The first pass's bin: 1/32 logit wide below the max, the last one from 32 logits down.
__device__ __forceinline__ int top_p_first_bin(float logit, float max_logit) {
  const float d = fminf(__fmul_rn(__fsub_rn(max_logit, logit), 32.0f), float(kTopPThreads - 1));
  return d > 0.0f ? static_cast<int>(d) : 0;
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

// out[i] = logits[i] for the ids kept, -inf elsewhere. fraction: top_p_fraction(top_p); use_p false
// for top_p >= 1. One block of kTopPThreads.
__global__ void __launch_bounds__(kTopPThreads)
    top_p_mask_kernel(const float* __restrict__ logits, int64_t n, const float* __restrict__ max_ptr,
                      uint64_t fraction, bool use_p, float min_gap, float* __restrict__ out) {
  grid_dependency_wait();
  __shared__ uint64_t hist[kTopPThreads];
  __shared__ uint64_t s_at, s_mass;
  const int t = threadIdx.x;
  const float m = *max_ptr;
  uint32_t cut = 0;   // keep keys above cut, and ids <= id_cut of the keys equal to it
  int64_t id_cut = n;
  bool ok = isfinite(m);
  if (ok && use_p) {
    hist[t] = 0;
    __syncthreads();
    uint64_t mine = 0;
    for (int64_t i = t; i < n; i += kTopPThreads) {
      const float q = logits[i];
      const uint64_t w = draw_weight_dev(q, m);
      if (w != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[top_p_first_bin(q, m)]), w);
      mine += w;
    }
    uint64_t total;
    block_exclusive_u64(mine, &total);  // syncs: the histogram is complete
    uint64_t target = __umul64hi(fraction, total) + (fraction * total != 0 ? 1 : 0);  // top_p_target
    target = target > 0 ? target : 1;
    const int first = top_p_crossing(hist[t], 0, target, &s_at, &s_mass);
    ok = first >= 0;
    // The crossing bin's key range (bins are monotone in the logit, so its keys are contiguous).
    uint32_t lo = 0xffffffffu, hi = 0;
    if (ok) {
      for (int64_t i = t; i < n; i += kTopPThreads) {
        const float q = logits[i];
        if (top_p_first_bin(q, m) != first) continue;
        const uint32_t k = top_p_key(q);
        lo = min(lo, k), hi = max(hi, k);
      }
      lo = __reduce_min_sync(0xffffffffu, lo), hi = __reduce_max_sync(0xffffffffu, hi);
      __shared__ uint32_t s_lo, s_hi;
      if (t == 0) s_lo = 0xffffffffu, s_hi = 0;
      __syncthreads();
      if ((t & 31) == 0) atomicMin(&s_lo, lo), atomicMax(&s_hi, hi);
      __syncthreads();
      lo = s_lo, hi = s_hi;
    }
    uint64_t above = s_at, mass = s_mass;
    // Narrow [lo, hi] to one key: bin (hi - key) * 1024 / range, best first.
    for (int pass = 0; ok && lo < hi && pass < 5; ++pass) {
      const uint64_t range = uint64_t(hi) - lo + 1;
      __syncthreads();  // everyone has read the previous pass's histogram
      hist[t] = 0;
      __syncthreads();
      for (int64_t i = t; i < n; i += kTopPThreads) {
        const float q = logits[i];
        const uint32_t k = top_p_key(q);
        if (k < lo || k > hi) continue;
        const uint64_t w = draw_weight_dev(q, m);
        if (w != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[(uint64_t(hi - k) << 10) / range]), w);
      }
      __syncthreads();
      const int b = top_p_crossing(hist[t], above, target, &s_at, &s_mass);
      ok = b >= 0;
      above = s_at, mass = s_mass;
      const uint64_t d_lo = (uint64_t(b) * range + 1023) >> 10, d_hi = ((uint64_t(b + 1) * range + 1023) >> 10) - 1;
      const uint32_t top = hi;
      hi = top - static_cast<uint32_t>(d_lo), lo = top - static_cast<uint32_t>(d_hi);
    }
    ok = ok && lo == hi;
    if (ok) {
      // The ties at the cut weigh w each; the first ceil((target - above) / w) of them in id order are kept.
      cut = lo;
      const uint64_t w = draw_weight_dev(top_p_value(cut), m);
      const uint64_t ties = w ? mass / w : 0, keep = w ? (target - above + w - 1) / w : 0;
      ok = w != 0;
      if (ok && keep < ties) {
        __shared__ int s_count[kTopPThreads / 32];
        __shared__ int64_t s_id;
        const int lane = t & 31, warp = t >> 5;
        int64_t seen = 0;
        for (int64_t base = 0; base < n; base += kTopPThreads) {
          const int64_t i = base + t;
          const bool tie = i < n && top_p_key(logits[i]) == cut;
          const unsigned bal = __ballot_sync(0xffffffffu, tie);
          if (lane == 0) s_count[warp] = __popc(bal);
          __syncthreads();
          int64_t before = seen;
          int block = 0;
          for (int v = 0; v < kTopPThreads / 32; ++v) {
            before += v < warp ? s_count[v] : 0;
            block += s_count[v];
          }
          if (tie && before + __popc(bal & ((1u << lane) - 1u)) == static_cast<int64_t>(keep) - 1) s_id = i;
          seen += block;
          __syncthreads();
          if (seen >= static_cast<int64_t>(keep)) break;
        }
        id_cut = s_id;
      }
    }
  }
  if (!ok) {  // outside the contract: the row unchanged
    for (int64_t i = t; i < n; i += kTopPThreads) out[i] = logits[i];
    return;
  }
  for (int64_t i = t; i < n; i += kTopPThreads) {
    const float q = logits[i];
    const uint32_t k = top_p_key(q);
    const bool kept = !use_p || k > cut || (k == cut && i <= id_cut);
    out[i] = kept && !(__fsub_rn(q, m) < min_gap) ? q : -INFINITY;
  }
}

}  // namespace tern::cuda::kernels
