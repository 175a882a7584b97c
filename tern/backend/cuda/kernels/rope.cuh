// Rotary embedding (rotate-half pairing) on contiguous [B, H, L, D]; dims >= rot are copied.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

template <typename T, typename P>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t B, int64_t H, int64_t L, int64_t D,
                            const P* __restrict__ pos, bool per_batch, const float* __restrict__ inv_freq,
                            int64_t rot, float attn_scale) {
  const int64_t n = B * H * L * D;
  const int64_t half = rot / 2;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % D;
    const int64_t row = e / D;  // (b, h, l)
    if (j >= rot) {
      out[e] = x[e];
      continue;
    }
    if (j >= half) continue;  // written by its partner j - half
    const int64_t l = row % L;
    const int64_t b = row / (H * L);
    const float p = static_cast<float>(pos[per_batch ? b * L + l : l]);
    const float angle = p * inv_freq[j];
    const float c = cosf(angle) * attn_scale, s = sinf(angle) * attn_scale;
    const float x1 = to_f32(x[e]), x2 = to_f32(x[e + half]);
    out[e] = from_f32<T>(x1 * c - x2 * s);
    out[e + half] = from_f32<T>(x2 * c + x1 * s);
  }
}

}  // namespace tern::cuda::kernels
