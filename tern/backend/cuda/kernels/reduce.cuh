// Reductions over the middle dim of contiguous [outer, n, inner]: softmax / log-softmax, sum, mean,
// max and argmax (top-k: topk.cuh). inner == 1 uses one block per row; inner > 1 one thread per column.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

enum ReduceCode { kSum = 0, kMean = 1, kMax = 2 };

// A row's max m and sum of exp(x - m) over the block; every thread gets both.
template <typename T>
__device__ __forceinline__ void block_row_max_sum(const T* __restrict__ xr, int64_t n, float& m, float& s) {
  m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, to_f32(xr[i]));
  m = block_max(m);
  s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(to_f32(xr[i]) - m);
  s = block_sum(s);
}

template <typename T>
__global__ void softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, bool log) {
  grid_dependency_wait();
  const T* xr = x + blockIdx.x * n;
  T* yr = out + blockIdx.x * n;
  float m, s;
  block_row_max_sum(xr, n, m, s);
  if (log) {
    const float ls = logf(s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = from_f32<T>(to_f32(xr[i]) - m - ls);
  } else {
    const float inv = 1.0f / s;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = from_f32<T>(expf(to_f32(xr[i]) - m) * inv);
  }
}

template <typename T>
__global__ void softmax_cols_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t outer, int64_t n,
                                    int64_t inner, bool log) {
  grid_dependency_wait();
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= outer * inner) return;
  const int64_t o = c / inner, in = c % inner;
  const T* xc = x + o * n * inner + in;
  T* yc = out + o * n * inner + in;
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = fmaxf(m, to_f32(xc[i * inner]));
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += expf(to_f32(xc[i * inner]) - m);
  const float ls = logf(s), inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) {
    float v = to_f32(xc[i * inner]) - m;
    yc[i * inner] = from_f32<T>(log ? v - ls : expf(v) * inv);
  }
}

template <typename T>
__global__ void reduce_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, int op) {
  grid_dependency_wait();
  const T* xr = x + blockIdx.x * n;
  float acc = op == kMax ? -INFINITY : 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = to_f32(xr[i]);
    acc = op == kMax ? fmaxf(acc, v) : acc + v;
  }
  acc = op == kMax ? block_max(acc) : block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = from_f32<T>(op == kMean ? acc / static_cast<float>(n) : acc);
}

template <typename T>
__global__ void reduce_cols_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t outer, int64_t n,
                                   int64_t inner, int op) {
  grid_dependency_wait();
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= outer * inner) return;
  const int64_t o = c / inner, in = c % inner;
  const T* xc = x + o * n * inner + in;
  float acc = op == kMax ? -INFINITY : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float v = to_f32(xc[i * inner]);
    acc = op == kMax ? fmaxf(acc, v) : acc + v;
  }
  out[c] = from_f32<T>(op == kMean ? acc / static_cast<float>(n) : acc);
}

// Few long rows (vocabulary rows): block (line, chunk) of the grid takes n / chunks elements.
__device__ __forceinline__ void row_chunk(int64_t n, int chunks, int64_t& lo, int64_t& hi) {
  const int64_t per = (n + chunks - 1) / chunks;
  lo = blockIdx.y * per;
  hi = lo + per < n ? lo + per : n;
}

// Stage 1 of the chunked softmax: each chunk's max and sum of exp(x - max) (0 for a chunk of -inf).
template <typename T>
__global__ void softmax_partial_kernel(const T* __restrict__ x, int64_t n, int chunks, float2* __restrict__ part) {
  grid_dependency_wait();
  int64_t lo, hi;
  row_chunk(n, chunks, lo, hi);
  const T* xr = x + blockIdx.x * n;
  float m = -INFINITY;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) m = fmaxf(m, to_f32(xr[i]));
  m = block_max(m);
  float s = 0.0f;
  if (m != -INFINITY) {
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += expf(to_f32(xr[i]) - m);
  }
  s = block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x * chunks + blockIdx.y] = make_float2(m, s);
}

// Stage 2: every block merges its line's partials, then writes its chunk as softmax_rows_kernel would.
template <typename T>
__global__ void softmax_chunks_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, int chunks,
                                      const float2* __restrict__ part, bool log) {
  grid_dependency_wait();
  const float2* p = part + blockIdx.x * chunks;
  float m = -INFINITY;
  for (int c = 0; c < chunks; ++c) m = fmaxf(m, p[c].x);
  float s = 0.0f;
  for (int c = 0; c < chunks; ++c) s += p[c].x == -INFINITY ? 0.0f : p[c].y * expf(p[c].x - m);
  if (m == -INFINITY) s = NAN;  // a row of -inf: x - m is NaN, as in softmax_rows_kernel
  int64_t lo, hi;
  row_chunk(n, chunks, lo, hi);
  const T* xr = x + blockIdx.x * n;
  T* yr = out + blockIdx.x * n;
  if (log) {
    const float ls = logf(s);
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) yr[i] = from_f32<T>(to_f32(xr[i]) - m - ls);
  } else {
    const float inv = 1.0f / s;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) yr[i] = from_f32<T>(expf(to_f32(xr[i]) - m) * inv);
  }
}

// Chunked sum / mean / max of few long rows: stage 1 each chunk's sum or max, stage 2 one warp a line.
template <typename T>
__global__ void reduce_partial_kernel(const T* __restrict__ x, int64_t n, int chunks, int op, float* __restrict__ part) {
  grid_dependency_wait();
  int64_t lo, hi;
  row_chunk(n, chunks, lo, hi);
  const T* xr = x + blockIdx.x * n;
  float acc = op == kMax ? -INFINITY : 0.0f;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    acc = op == kMax ? fmaxf(acc, v) : acc + v;
  }
  acc = op == kMax ? block_max(acc) : block_sum(acc);
  if (threadIdx.x == 0) part[blockIdx.x * chunks + blockIdx.y] = acc;
}

template <typename T>
__global__ void reduce_final_kernel(const float* __restrict__ part, int chunks, int64_t n, int op, T* __restrict__ out) {
  grid_dependency_wait();
  float acc = op == kMax ? -INFINITY : 0.0f;
  for (int c = threadIdx.x; c < chunks; c += 32) {
    const float v = part[blockIdx.x * chunks + c];
    acc = op == kMax ? fmaxf(acc, v) : acc + v;
  }
  acc = op == kMax ? warp_max(acc) : warp_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = from_f32<T>(op == kMean ? acc / static_cast<float>(n) : acc);
}

// (value, index) ordering: larger value first, then lower index. NaN never wins.
__device__ __forceinline__ bool better(float v, int64_t i, float bv, int64_t bi) {
  return v > bv || (v == bv && i < bi);
}

// Block-wide best (value, index); every thread gets the result.
__device__ __forceinline__ void block_best(float& v, int64_t& idx) {
  __shared__ float sv[32];
  __shared__ int64_t si[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (better(ov, oi, v, idx)) v = ov, idx = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) sv[warp] = v, si[warp] = idx;
  __syncthreads();
  v = lane < n_warps ? sv[lane] : -INFINITY;
  idx = lane < n_warps ? si[lane] : INT64_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (better(ov, oi, v, idx)) v = ov, idx = oi;
  }
}

// The block's best (value, index) of x[lo, hi); every thread gets it.
template <typename T>
__device__ __forceinline__ void block_best_of(const T* x, int64_t lo, int64_t hi, float& bv, int64_t& bi) {
  bv = -INFINITY;
  bi = INT64_MAX;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float v = to_f32(x[i]);
    if (better(v, i, bv, bi)) bv = v, bi = i;
  }
  block_best(bv, bi);
}

// One block per (outer, inner) line of n elements at stride `inner`.
template <typename T>
__global__ void argmax_kernel(const T* __restrict__ x, int32_t* __restrict__ out, int64_t n, int64_t inner) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  const int64_t o = line / inner, in = line % inner;
  const T* xl = x + o * n * inner + in;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = to_f32(xl[i * inner]);
    if (better(v, i, bv, bi)) bv = v, bi = i;
  }
  block_best(bv, bi);
  if (threadIdx.x == 0) out[line] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
}

// Two-stage argmax for few long lines (vocabulary rows): stage 1, block (line, chunk) finds the best
// of its chunk of n/chunks elements (inner == 1); stage 2, one warp per line merges the chunks.
template <typename T>
__global__ void argmax_partial_kernel(const T* __restrict__ x, int64_t n, int chunks, float* __restrict__ best_v,
                                      int64_t* __restrict__ best_i) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  const int64_t per = (n + chunks - 1) / chunks;
  const int64_t lo = blockIdx.y * per, hi = min(n, lo + per);
  float bv;
  int64_t bi;
  block_best_of(x + line * n, lo, hi, bv, bi);
  if (threadIdx.x == 0) {
    best_v[line * chunks + blockIdx.y] = bv;
    best_i[line * chunks + blockIdx.y] = bi;
  }
}

__global__ void argmax_final_kernel(const float* __restrict__ best_v, const int64_t* __restrict__ best_i, int chunks,
                                    int32_t* __restrict__ out) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int c = threadIdx.x; c < chunks; c += 32) {
    float v = best_v[line * chunks + c];
    int64_t i = best_i[line * chunks + c];
    if (better(v, i, bv, bi)) bv = v, bi = i;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  if (threadIdx.x == 0) out[line] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
}

// ops::token_logprobs: block r reads row r of x [R, n] and writes x[r, t_r] - m - log(sum_i exp(x[r, i] - m)),
// m the row's max (a row of -inf gives NaN, as the CPU).
template <typename T>
__global__ void token_logprob_kernel(const T* __restrict__ x, int64_t n, const int32_t* __restrict__ targets,
                                     float* __restrict__ out) {
  grid_dependency_wait();
  const T* xr = x + blockIdx.x * n;
  float m, s;
  block_row_max_sum(xr, n, m, s);
  if (threadIdx.x == 0) out[blockIdx.x] = to_f32(xr[targets[blockIdx.x]]) - m - logf(s);
}

// ops::greedy_choice of f32 rows: block (line, chunk) finds the best (value, index) of its chunk of
// n/chunks logits and the sum of exp(x - that value) over the chunk. With one chunk a line (gridDim.y ==
// 1) it writes the line's id and log-probability itself; else it writes its part and
// greedy_final_kernel merges a line's parts (one warp a line).
struct GreedyPart {
  float v, s;
  int64_t i;
};

__global__ void greedy_partial_kernel(const float* __restrict__ x, int64_t n, GreedyPart* __restrict__ part,
                                      int32_t* __restrict__ ids, float* __restrict__ logprobs) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  const int chunks = static_cast<int>(gridDim.y);
  const int64_t per = (n + chunks - 1) / chunks;
  const int64_t lo = blockIdx.y * per, hi = min(n, lo + per);
  const float* xl = x + line * n;
  float bv;
  int64_t bi;
  block_best_of(xl, lo, hi, bv, bi);  // every thread holds the block's best: the branch below is uniform
  float s = 0.0f;
  if (bv > -INFINITY)
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += expf(xl[i] - bv);
  s = block_sum(s);
  if (threadIdx.x != 0) return;
  if (chunks == 1) {
    ids[line] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
    logprobs[line] = -logf(s);
  } else {
    part[line * chunks + blockIdx.y] = GreedyPart{bv, s, bi};
  }
}

__global__ void greedy_final_kernel(const GreedyPart* __restrict__ part, int chunks, int32_t* __restrict__ ids,
                                    float* __restrict__ logprobs) {
  grid_dependency_wait();
  const int64_t line = blockIdx.x;
  const GreedyPart* p = part + line * chunks;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int c = threadIdx.x; c < chunks; c += 32)
    if (better(p[c].v, p[c].i, bv, bi)) bv = p[c].v, bi = p[c].i;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  float s = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += 32)
    if (p[c].v > -INFINITY) s += p[c].s * expf(p[c].v - bv);
  s = warp_sum(s);
  if (threadIdx.x == 0) {
    ids[line] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
    logprobs[line] = -logf(s);
  }
}

}  // namespace tern::cuda::kernels
