// Row attention: one block per (query row, key split), 4 warps striding over the visible keys with an
// online softmax each, merged in shared memory. Handles every mask, dtype and head dim <= 256; with
// several splits it is flash-decoding (partials merged by attention_combine_kernel).
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

struct RowsArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* partial;  // [n_splits, rows, Dv + 2] when n_splits > 1
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  int64_t qs[3], ks[3], vs[3];
  float scale, softcap;
  bool causal;
  int64_t q_offset, window;
  const int32_t* kv_len;
  const float* bias;
  int64_t bs[4];
  int n_splits;
};

constexpr int kRowsWarps = 4;

// Visible keys of query row i of batch b: [lo, hi).
__device__ __forceinline__ void visible_range(const RowsArgs& a, int64_t b, int64_t i, int64_t& lo, int64_t& hi) {
  hi = a.Lk;
  if (a.kv_len) hi = min(hi, static_cast<int64_t>(a.kv_len[b]));
  if (a.causal) hi = min(hi, i + a.q_offset + 1);
  lo = 0;
  if (a.window > 0) lo = max(lo, i + a.q_offset - a.window + 1);
}

template <typename T, int NT>
__global__ void __launch_bounds__(kRowsWarps * 32) attention_rows_kernel(RowsArgs a) {
  grid_dependency_wait();
  const int64_t row = blockIdx.x;  // (b, h, i)
  const int64_t i = row % a.Lq;
  const int64_t h = (row / a.Lq) % a.Hq;
  const int64_t b = row / (a.Lq * a.Hq);
  const int64_t hk = h / (a.Hq / a.Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  int64_t lo, hi;
  visible_range(a, b, i, lo, hi);
  const int64_t span = hi > lo ? hi - lo : 0;
  const int64_t chunk = (span + a.n_splits - 1) / a.n_splits;
  const int64_t start = lo + chunk * blockIdx.y;
  const int64_t stop = min(hi, start + chunk);

  const T* qp = static_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
  const T* kp = static_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[1];
  const T* vp = static_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[1];
  const float* bp = a.bias ? a.bias + b * a.bs[0] + h * a.bs[1] + i * a.bs[2] : nullptr;

  float q[NT], acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int d = lane + 32 * t;
    q[t] = d < a.D ? to_f32(qp[d]) : 0.0f;
    acc[t] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = start + warp; j < stop; j += kRowsWarps) {
    const T* kj = kp + j * a.ks[2];
    float s = 0.0f;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int d = lane + 32 * t;
      if (d < a.D) s += q[t] * to_f32(kj[d]);
    }
    s = warp_sum(s) * a.scale;
    if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
    if (bp) s += bp[j * a.bs[3]];
    if (s == -INFINITY) continue;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);
    const float p = expf(s - m_new);
    l = l * corr + p;
    const T* vj = vp + j * a.vs[2];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int d = lane + 32 * t;
      acc[t] = acc[t] * corr + (d < a.Dv ? p * to_f32(vj[d]) : 0.0f);
    }
    m = m_new;
  }

  __shared__ float sm[kRowsWarps], sl[kRowsWarps];
  __shared__ float sacc[kRowsWarps][NT * 32];
  if (lane == 0) sm[warp] = m, sl[warp] = l;
#pragma unroll
  for (int t = 0; t < NT; ++t) sacc[warp][lane + 32 * t] = acc[t];
  __syncthreads();
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kRowsWarps; ++w) M = fmaxf(M, sm[w]);
  float L = 0.0f, f[kRowsWarps];
#pragma unroll
  for (int w = 0; w < kRowsWarps; ++w) {
    f[w] = sm[w] == -INFINITY ? 0.0f : expf(sm[w] - M);
    L += sl[w] * f[w];
  }
  if (a.n_splits == 1) {
    T* op = static_cast<T*>(a.out) + row * a.Dv;
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < a.Dv; d += blockDim.x) {
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < kRowsWarps; ++w) o += sacc[w][d] * f[w];
      op[d] = from_f32<T>(o * inv);
    }
  } else {
    const int64_t rows = a.B * a.Hq * a.Lq;
    float* pp = a.partial + (blockIdx.y * rows + row) * (a.Dv + 2);
    for (int d = threadIdx.x; d < a.Dv; d += blockDim.x) {
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < kRowsWarps; ++w) o += sacc[w][d] * f[w];
      pp[d] = o;
    }
    if (threadIdx.x == 0) pp[a.Dv] = M, pp[a.Dv + 1] = L;
  }
}

// Merges n_splits partials (acc unnormalised, max, sum) of each row into the output (rows of Dv at a
// stride of os).
template <typename T>
__global__ void attention_combine_kernel(const float* __restrict__ partial, T* __restrict__ out, int64_t rows,
                                         int64_t Dv, int n_splits, int64_t os) {
  grid_dependency_wait();
  const int64_t row = blockIdx.x;
  float M = -INFINITY;
  for (int s = 0; s < n_splits; ++s) M = fmaxf(M, partial[(s * rows + row) * (Dv + 2) + Dv]);
  float L = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float* pp = partial + (s * rows + row) * (Dv + 2);
    if (pp[Dv] != -INFINITY) L += pp[Dv + 1] * expf(pp[Dv] - M);
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
      const float* pp = partial + (s * rows + row) * (Dv + 2);
      if (pp[Dv] != -INFINITY) o += pp[d] * expf(pp[Dv] - M);
    }
    out[row * os + d] = from_f32<T>(o * inv);
  }
}

}  // namespace tern::cuda::kernels
