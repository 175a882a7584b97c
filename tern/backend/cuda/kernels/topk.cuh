// Top-k along the middle dim of contiguous [outer, n, inner], on 64-bit rank keys: an
// order-preserving key of the value above the complemented index, so keys are distinct and a larger
// key ranks first, in the CPU's order (NaN first, then descending, ties by lower index). Long
// contiguous lines (vocabulary rows) with k <= kTopkMaxK go in two stages selecting by radix: block
// (slice, line) keeps the k best of its slice of kTopkSlice or fewer elements, then one block per
// line keeps the k best of those candidates and sorts them.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

constexpr int kTopkThreads = 1024;
constexpr int kTopkMaxK = 1024;
constexpr int kTopkSlice = 8192;  // most elements of one stage-1 block (their 32-bit keys in shared memory)

// Order-preserving key of a float: -0 as +0, every NaN above +inf. Never 0 (that would be a NaN).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (v != v) return 0xffffffffu;
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t rank_key(uint32_t value_key, uint32_t index) {
  return (uint64_t(value_key) << 32) | uint32_t(~index);
}

// Keeps a key iff (key >> shift) >= (prefix >> shift); shift < 64.
struct RadixCut {
  uint64_t prefix;
  int shift;
  __device__ bool keeps(uint64_t key) const { return key != 0 && (key >> shift) >= (prefix >> shift); }
};

// Block-wide (every thread calls it, blockDim a multiple of 32): the cut that keeps exactly the k
// largest of the keys key_at(i), i < n, which are distinct apart from zeros (ignored); 0 < k <= the
// number of non-zero keys. Eight bits a pass, from the top, until the boundary digit holds only keys
// to keep.
template <class KeyAt>
__device__ RadixCut radix_cut(KeyAt key_at, int n, uint32_t k) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_bin, s_above, s_count;
  const int lane = threadIdx.x & 31;
  uint64_t prefix = 0;
  int shift = 64;
  uint32_t need = k;
  for (;;) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const int next = shift - 8;
    for (int base = 0; base < n; base += blockDim.x) {
      const int i = base + threadIdx.x;
      const uint64_t key = i < n ? key_at(i) : 0;
      const bool on = key != 0 && (shift == 64 || (key >> shift) == (prefix >> shift));
      const unsigned active = __ballot_sync(0xffffffffu, on);
      if (on) {
        const unsigned digit = unsigned(key >> next) & 255u;
        const unsigned peers = __match_any_sync(active, digit);
        if (lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l holds digits 255 - 8l down to 248 - 8l
      uint32_t h[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += h[j] = hist[255 - lane * 8 - j];
      uint32_t incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
      }
      uint32_t above = incl - sum;
      if (above < need && need <= incl) {
        for (int j = 0; j < 8; ++j) {
          if (above + h[j] >= need) {
            s_bin = 255 - lane * 8 - j;
            s_above = above;
            s_count = h[j];
            break;
          }
          above += h[j];
        }
      }
    }
    __syncthreads();
    const uint32_t bin = s_bin, above = s_above, count = s_count;
    __syncthreads();  // read before the next pass rewrites them
    shift = next;
    prefix |= uint64_t(bin) << shift;
    need -= above;
    if (count == need) return {prefix, shift};
  }
}

// Block-wide max of u64; every thread gets it.
__device__ __forceinline__ uint64_t block_max_u64(uint64_t v) {
  __shared__ uint64_t part[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) v = max(v, part[w]);
  return v;
}

// Lines at stride inner, or k past kTopkMaxK: one block per line, k rounds of a block-wide best
// among the keys ranked after the previous pick.
template <typename T>
__global__ void topk_kernel(const T* __restrict__ x, T* __restrict__ values, int32_t* __restrict__ indices, int64_t n,
                            int64_t inner, int64_t k) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  const int64_t o = line / inner, in = line % inner;
  const T* xl = x + o * n * inner + in;
  uint64_t last = ~uint64_t(0);
  for (int64_t r = 0; r < k; ++r) {
    uint64_t best = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint64_t key = rank_key(order_key(to_f32(xl[i * inner])), static_cast<uint32_t>(i));
      if (key < last && key > best) best = key;
    }
    best = block_max_u64(best);
    const uint32_t bi = ~static_cast<uint32_t>(best);
    if (threadIdx.x == 0) {
      const int64_t at = o * k * inner + r * inner + in;
      values[at] = xl[int64_t(bi) * inner];
      indices[at] = static_cast<int32_t>(bi);
    }
    last = best;
  }
}

// Stage 1: grid (slices, lines); block (s, l) writes the k best rank keys of x[l, s*per : (s+1)*per]
// (per <= kTopkSlice) to cand[(l * slices + s) * k ...], zero-filled when the slice holds fewer.
template <typename T>
__global__ void __launch_bounds__(kTopkThreads)
    topk_slices_kernel(const T* __restrict__ x, int64_t n, int per, int k, uint64_t* __restrict__ cand) {
  grid_dependency_wait();
  __shared__ uint32_t keys[kTopkSlice];
  __shared__ uint32_t s_taken;
  const int64_t lo = int64_t(blockIdx.x) * per;
  const int m = static_cast<int>(n - lo < per ? n - lo : per);
  const T* xs = x + int64_t(blockIdx.y) * n + lo;
  for (int i = threadIdx.x; i < m; i += blockDim.x) keys[i] = order_key(to_f32(xs[i]));
  if (threadIdx.x == 0) s_taken = 0;
  __syncthreads();
  uint64_t* out = cand + (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * k;
  auto key_at = [&](int i) { return rank_key(keys[i], static_cast<uint32_t>(lo + i)); };
  if (m <= k) {
    for (int i = threadIdx.x; i < k; i += blockDim.x) out[i] = i < m ? key_at(i) : 0;
    return;
  }
  const RadixCut cut = radix_cut(key_at, m, k);
  for (int i = threadIdx.x; i < m; i += blockDim.x) {
    const uint64_t key = key_at(i);
    if (cut.keeps(key)) out[atomicAdd(&s_taken, 1u)] = key;
  }
}

// Stage 2: one block per line; the k best of its m = slices * k candidates, sorted (bitonic, best
// first), written as values [lines, k] and indices [lines, k].
template <typename T>
__global__ void __launch_bounds__(kTopkThreads)
    topk_merge_kernel(const T* __restrict__ x, int64_t n, const uint64_t* __restrict__ cand, int m, int k,
                      T* __restrict__ values, int32_t* __restrict__ indices) {
  grid_dependency_wait();
  __shared__ uint64_t sel[kTopkMaxK];
  __shared__ uint32_t s_taken;
  const uint64_t* c = cand + int64_t(blockIdx.x) * m;
  int width = 1;
  while (width < k) width <<= 1;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sel[i] = 0;
  if (threadIdx.x == 0) s_taken = 0;
  __syncthreads();
  const RadixCut cut = radix_cut([&](int i) { return c[i]; }, m, k);
  for (int i = threadIdx.x; i < m; i += blockDim.x) {
    const uint64_t key = c[i];
    if (cut.keeps(key)) sel[atomicAdd(&s_taken, 1u)] = key;
  }
  for (int size = 2; size <= width; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int t = threadIdx.x; t < width / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (stride - 1)), j = i + stride;
        const uint64_t a = sel[i], b = sel[j];
        if ((a < b) == ((i & size) == 0)) sel[i] = b, sel[j] = a;
      }
    }
  }
  __syncthreads();
  const T* xl = x + int64_t(blockIdx.x) * n;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const uint32_t idx = ~static_cast<uint32_t>(sel[j]);
    values[int64_t(blockIdx.x) * k + j] = xl[idx];
    indices[int64_t(blockIdx.x) * k + j] = static_cast<int32_t>(idx);
  }
}

}  // namespace tern::cuda::kernels
