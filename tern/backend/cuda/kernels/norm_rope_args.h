// The arguments of the fused q/k norm and rotary-embedding kernel (norm_rope.cuh), shared by the host
// entry point and the kernel.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

constexpr int kNormRopeWarps = 4;

struct NormRopeArgs {
  const void* x[3];      // q, k and (with kv) v: [B, H, L, D] at strides st (elements; the last dim contiguous)
  int64_t st[3][3];      // b, h, l strides
  int64_t heads[2];      // Hq, Hk (v has Hk heads)
  const void* w[2];      // norm weights [D] or nullptr
  void* out[2];          // contiguous [B, H, L, D]; out[1] unused with kv
  int64_t B, L, D, rot;  // rot: rotated dims (even, <= D)
  int64_t Dv;            // v's head dim (with kv)
  const void* pos;       // [L] or [B, L] (per_batch)
  bool per_batch;
  const float* inv_freq;  // [rot / 2]
  float attn_scale, eps;
  // With kv (L == 1): the rotated keys and the values go straight into the cache storage, row b at slot
  // pos[b] (% ring when ring > 0) of kv[0] [B, Hk, N, D] and kv[1] [B, Hk, N, Dv], as write_positions
  // places them; a slot outside [0, N) writes nothing.
  void* kv[2];
  int64_t kv_st[2][3];  // b, h, slot strides
  int64_t kv_n, ring;
};

}  // namespace tern::cuda::kernels
