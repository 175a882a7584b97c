// RMSNorm: one block per row (rows of x at the offsets of a Layout over the leading dims, the last dim
// contiguous), f32 sum of squares, weight of its own storage type; optionally the residual sum
// x + delta first, rounded to T and written out, then normalised (add_rms_norm).
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

// This block's row of each operand (delta and sum nullptr when there is no residual add).
template <typename T>
struct NormRow {
  const T* x;
  const T* delta;
  T* sum;
  T* out;
  __device__ __forceinline__ NormRow(const T* x0, const Layout& rows, const T* delta0, T* sum0, T* out0, int64_t d)
      : x(x0 + offset_of(rows, blockIdx.x)),
        delta(delta0 ? delta0 + blockIdx.x * d : nullptr),
        sum(sum0 ? sum0 + blockIdx.x * d : nullptr),
        out(out0 + blockIdx.x * d) {}
};

template <typename T, typename W>
__global__ void rms_norm_kernel(const T* __restrict__ x, Layout rows, const T* __restrict__ delta,
                                T* __restrict__ sum, const W* __restrict__ w, T* __restrict__ out, int64_t d,
                                float eps) {
  grid_dependency_wait();
  const NormRow<T> r(x, rows, delta, sum, out, d);
  const T *xr = r.x, *dr = r.delta;
  T *sr = r.sum, *yr = r.out;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if (dr) {
      const T h = from_f32<T>(v + to_f32(dr[i]));
      sr[i] = h;
      v = to_f32(h);
    }
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = inv_rms(ss, d, eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = (sr ? to_f32(sr[i]) : to_f32(xr[i])) * inv;
    if (w) v *= to_f32(w[i]);
    yr[i] = from_f32<T>(v);
  }
}

// The same for rows of d <= 8 * blockDim.x: each thread holds its 8 elements (and their weights) in
// registers, so a row costs one round of loads, one block reduction and one round of stores -- the
// decode step's norms are single rows, where the two passes above are two dependent round trips.
constexpr int kNormValuesPerThread = 8;

template <typename T, typename W>
__global__ void rms_norm_regs_kernel(const T* __restrict__ x, Layout rows, const T* __restrict__ delta,
                                     T* __restrict__ sum, const W* __restrict__ w, T* __restrict__ out, int64_t d,
                                     float eps) {
  grid_dependency_wait();
  const NormRow<T> r(x, rows, delta, sum, out, d);
  const T *xr = r.x, *dr = r.delta;
  T *sr = r.sum, *yr = r.out;
  float v[kNormValuesPerThread], wv[kNormValuesPerThread];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormValuesPerThread; ++i) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    v[i] = 0.0f;
    wv[i] = 1.0f;
    if (j < d) {
      v[i] = to_f32(xr[j]);
      if (dr) {
        const T h = from_f32<T>(v[i] + to_f32(dr[j]));
        sr[j] = h;
        v[i] = to_f32(h);
      }
      if (w) wv[i] = to_f32(w[j]);
    }
    ss += v[i] * v[i];
  }
  ss = block_sum(ss);
  const float inv = inv_rms(ss, d, eps);
#pragma unroll
  for (int i = 0; i < kNormValuesPerThread; ++i) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (j < d) yr[j] = from_f32<T>(w ? v[i] * inv * wv[i] : v[i] * inv);
  }
}

// rms_norm_regs_kernel for 2-byte T, rows of d % 8 == 0 (d <= 8,192) with 16-byte aligned rows: thread
// t holds elements [8t, 8t + 8) of the row, loaded and stored as one 16-byte vector each, so a row of
// 4,096 takes 512 vector accesses per operand instead of 4,096 element ones.
template <typename T, typename W>
__global__ void rms_norm_vec_kernel(const T* __restrict__ x, Layout rows, const T* __restrict__ delta,
                                    T* __restrict__ sum, const W* __restrict__ w, T* __restrict__ out, int64_t d,
                                    float eps) {
  grid_dependency_wait();
  static_assert(sizeof(T) == 2, "8 elements per 16-byte vector");
  const NormRow<T> r(x, rows, delta, sum, out, d);
  union Vec {
    uint4 u;
    T e[8];
  };
  const int64_t c = threadIdx.x, j0 = 8 * c;
  const bool live = j0 < d;
  float v[8], wv[8];
  float ss = 0.0f;
  if (live) {
    Vec xv, dv;
    xv.u = __ldg(reinterpret_cast<const uint4*>(r.x) + c);
    if (r.delta) dv.u = __ldg(reinterpret_cast<const uint4*>(r.delta) + c);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[i] = to_f32(xv.e[i]);
      wv[i] = w ? to_f32(w[j0 + i]) : 1.0f;
    }
    if (r.delta) {
      Vec sv;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        sv.e[i] = from_f32<T>(v[i] + to_f32(dv.e[i]));
        v[i] = to_f32(sv.e[i]);
      }
      reinterpret_cast<uint4*>(r.sum)[c] = sv.u;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  ss = block_sum(ss);
  if (!live) return;
  const float inv = inv_rms(ss, d, eps);
  Vec o;
#pragma unroll
  for (int i = 0; i < 8; ++i) o.e[i] = from_f32<T>(w ? v[i] * inv * wv[i] : v[i] * inv);
  reinterpret_cast<uint4*>(r.out)[c] = o.u;
}

}  // namespace tern::cuda::kernels
