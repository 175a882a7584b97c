// Rotary embedding (rotate-half pairing) on contiguous [B, H, L, D]: one block per row (b, h, l),
// threads over the rot / 2 pairs; dims >= rot are copied.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

template <typename T, typename P>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t H, int64_t L, int64_t D,
                            const P* __restrict__ pos, bool per_batch, const float* __restrict__ inv_freq,
                            int64_t rot, float attn_scale) {
  grid_dependency_wait();
  const int64_t row = blockIdx.x;  // (b, h, l)
  const int64_t l = row % L;
  const int64_t b = row / (H * L);
  const float p = static_cast<float>(pos[per_batch ? b * L + l : l]);
  const T* xr = x + row * D;
  T* yr = out + row * D;
  const int64_t half = rot / 2;
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    const float angle = p * inv_freq[j];
    const float c = cosf(angle) * attn_scale, s = sinf(angle) * attn_scale;
    const float x1 = to_f32(xr[j]), x2 = to_f32(xr[j + half]);
    yr[j] = from_f32<T>(x1 * c - x2 * s);
    yr[j + half] = from_f32<T>(x2 * c + x1 * s);
  }
  for (int64_t j = rot + threadIdx.x; j < D; j += blockDim.x) yr[j] = xr[j];
}

}  // namespace tern::cuda::kernels
