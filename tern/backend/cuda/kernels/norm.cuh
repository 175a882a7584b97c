// RMSNorm: one block per row, f32 sum of squares, weight of its own storage type.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

template <typename T, typename W>
__global__ void rms_norm_kernel(const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ out, int64_t d,
                                float eps) {
  const T* xr = x + blockIdx.x * d;
  T* yr = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = to_f32(xr[i]);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = to_f32(xr[i]) * inv;
    if (w) v *= to_f32(w[i]);
    yr[i] = from_f32<T>(v);
  }
}

}  // namespace tern::cuda::kernels
