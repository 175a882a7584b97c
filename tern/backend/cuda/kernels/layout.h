// Layout: the shape and strides of a strided operand as kernels receive it (by value). Plain C++,
// shared by host launch code and device code.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

constexpr int kMaxDims = 8;

// Up to kMaxDims dims (after coalescing), row-major; strides in elements, 0 for broadcast dims.
struct Layout {
  int rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

}  // namespace tern::cuda::kernels
