// The by-value arguments of the position-write kernel (index.cuh), shared with the host launcher.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

// One or two writes dst[b, h, positions[b] (% ring when ring > 0), :] = src[b, h, 0, :] of one element
// size and one [B, H].
struct PositionWrites {
  struct One {
    void* dst;
    const void* src;
    int64_t ds[4], ss[4];  // element strides of dst [B, H, N, D] and src [B, H, 1, D]
    int64_t H, N, D;
  } pair[2];
  int64_t ring;
};

}  // namespace tern::cuda::kernels
