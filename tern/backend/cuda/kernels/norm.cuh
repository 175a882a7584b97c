// RMSNorm: one block per row (rows of x at the offsets of a Layout over the leading dims, the last dim
// contiguous), f32 sum of squares, weight of its own storage type; optionally the residual sum
// x + delta first, rounded to T and written out, then normalised (add_rms_norm).
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

template <typename T, typename W>
__global__ void rms_norm_kernel(const T* __restrict__ x, Layout rows, const T* __restrict__ delta,
                                T* __restrict__ sum, const W* __restrict__ w, T* __restrict__ out, int64_t d,
                                float eps) {
  grid_dependency_wait();
  const T* xr = x + offset_of(rows, blockIdx.x);
  const T* dr = delta ? delta + blockIdx.x * d : nullptr;
  T* sr = sum ? sum + blockIdx.x * d : nullptr;
  T* yr = out + blockIdx.x * d;
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
  const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = (sr ? to_f32(sr[i]) : to_f32(xr[i])) * inv;
    if (w) v *= to_f32(w[i]);
    yr[i] = from_f32<T>(v);
  }
}

}  // namespace tern::cuda::kernels
