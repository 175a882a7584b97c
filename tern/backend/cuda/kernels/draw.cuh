// The sampler's row draw (ops::draw_index): the integer inverse-CDF rule of tern/base/draw_weight.h.
// Stage 1: block c sums the u64 weights of ids [c * kDrawChunk, (c + 1) * kDrawChunk); stage 2: one
// block finds the chunk holding the target, then the id inside it. Integer sums are exact, so the
// order of the adds does not matter and the id equals the host's.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

constexpr int kDrawChunk = 2048;
constexpr int kDrawPickThreads = 1024;

// tern/base/fast_exp.h's exp_f32, one rounded f32 operation at a time (never contracted to an FMA),
// so that it returns the host's bits.
__device__ __forceinline__ float exp_f32_ieee(float x) {
  float xc = x > 88.8f ? 88.8f : (x < -104.0f ? -104.0f : x);
  xc = xc == xc ? xc : 0.0f;
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, 1.44269504088896341f), 12582912.0f), 12582912.0f);
  float r = __fsub_rn(xc, __fmul_rn(n, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  const float y = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2, n2 = ni - n1;
  const float res = __fmul_rn(__fmul_rn(y, __int_as_float((n1 + 127) << 23)), __int_as_float((n2 + 127) << 23));
  return x == x ? res : x;
}

__device__ __forceinline__ uint64_t draw_weight_dev(float logit, float max_logit) {
  return static_cast<uint64_t>(__float2ll_rz(__fmul_rn(exp_f32_ieee(__fsub_rn(logit, max_logit)), 0x1p40f)));  // draw_weight_of
}

// Block-wide exclusive prefix sum of v in thread order; *total gets the block's sum. Every thread calls it.
__device__ __forceinline__ uint64_t block_exclusive_u64(uint64_t v, uint64_t* total) {
  __shared__ uint64_t warps[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  uint64_t incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  __syncthreads();
  if (lane == 31) warps[warp] = incl;
  __syncthreads();
  uint64_t before = 0, all = 0;
  for (int w = 0; w < n_warps; ++w) {
    if (w < warp) before += warps[w];
    all += warps[w];
  }
  *total = all;
  return before + incl - v;
}

__global__ void __launch_bounds__(256) draw_sums_kernel(const float* __restrict__ logits, int64_t n,
                                                        const float* __restrict__ max_ptr, uint64_t* __restrict__ sums) {
  grid_dependency_wait();
  const float max_logit = *max_ptr;
  if (!isfinite(max_logit)) {  // the pick writes n - 1
    if (threadIdx.x == 0) sums[blockIdx.x] = 0;
    return;
  }
  const int64_t lo = int64_t(blockIdx.x) * kDrawChunk;
  const int64_t hi = lo + kDrawChunk < n ? lo + kDrawChunk : n;
  uint64_t s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += draw_weight_dev(logits[i], max_logit);
  uint64_t total;
  block_exclusive_u64(s, &total);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// One block of kDrawPickThreads; chunks = ceil(n / kDrawChunk) <= 4 * kDrawPickThreads.
__global__ void __launch_bounds__(kDrawPickThreads) draw_pick_kernel(const float* __restrict__ logits, int64_t n,
                                                                     const float* __restrict__ max_ptr, float u_arg,
                                                                     const float* __restrict__ u_ptr,
                                                                     const uint64_t* __restrict__ sums, int chunks,
                                                                     int32_t* __restrict__ out) {
  grid_dependency_wait();
  const float max_logit = *max_ptr;
  const float u = u_ptr ? *u_ptr : u_arg;
  if (!isfinite(max_logit) || !(u >= 0.0f && u < 1.0f)) {
    if (threadIdx.x == 0) *out = static_cast<int32_t>(n - 1);
    return;
  }
  __shared__ int64_t s_chunk;
  __shared__ uint64_t s_base;
  __shared__ int32_t s_id;
  // Each thread takes 4 consecutive chunks.
  const int c0 = threadIdx.x * 4;
  uint64_t part[4], mine = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) mine += part[j] = c0 + j < chunks ? sums[c0 + j] : 0;
  uint64_t total;
  uint64_t before = block_exclusive_u64(mine, &total);
  const uint64_t q = static_cast<uint64_t>(__fmul_rn(u, 0x1p24f));
  const uint64_t target = (__umul64hi(q, total) << 40) | ((q * total) >> 24);
  if (threadIdx.x == 0) s_chunk = -1, s_id = static_cast<int32_t>(n - 1);
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (before <= target && target < before + part[j]) s_chunk = c0 + j, s_base = before;
    before += part[j];
  }
  __syncthreads();
  if (s_chunk < 0) {  // only when the max is not the row's max
    if (threadIdx.x == 0) *out = s_id;
    return;
  }
  // Inside the chunk: each thread takes 2 consecutive ids.
  const int64_t lo = s_chunk * kDrawChunk + threadIdx.x * 2;
  uint64_t w[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) w[j] = lo + j < n ? draw_weight_dev(logits[lo + j], max_logit) : 0;
  uint64_t chunk_total;
  uint64_t cum = s_base + block_exclusive_u64(w[0] + w[1], &chunk_total);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (cum <= target && target < cum + w[j]) s_id = static_cast<int32_t>(lo + j);
    cum += w[j];
  }
  __syncthreads();
  if (threadIdx.x == 0) *out = s_id;
}

}  // namespace tern::cuda::kernels
