// The arguments of the fused q/k norm and rotary-embedding kernel (norm_rope.cuh), shared by the host
// entry point and the kernel.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

constexpr int kNormRopeWarps = 4;

struct NormRopeArgs {
  const void* x[2];      // q, k: [B, H, L, D] at strides st (elements; the last dim contiguous)
  int64_t st[2][3];      // b, h, l strides
  int64_t heads[2];      // Hq, Hk
  const void* w[2];      // norm weights [D] or nullptr
  void* out[2];          // contiguous [B, H, L, D]
  int64_t B, L, D, rot;  // rot: rotated dims (even, <= D)
  const void* pos;       // [L] or [B, L] (per_batch)
  bool per_batch;
  const float* inv_freq;  // [rot / 2]
  float attn_scale, eps;
};

}  // namespace tern::cuda::kernels
