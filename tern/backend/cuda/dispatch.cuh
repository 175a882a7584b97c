// Dtype -> device type dispatch for the launchers in the .cu files, and the launch-size helper.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "tern/backend/cuda/runtime/check.h"
#include "tern/core/dtype.h"

namespace tern::cuda {

// Calls fn(T{}) with T the device type of a float dtype; throws tern::Error on others.
template <typename Fn>
void dispatch_float(Dtype d, Fn&& fn) {
  switch (d) {
    case Dtype::f32: fn(float{}); return;
    case Dtype::bf16: fn(__nv_bfloat16{}); return;
    case Dtype::f16: fn(__half{}); return;
    default: throw_unsupported_dtype("this kernel", static_cast<int>(d));
  }
}

// Float dtypes plus i32 and i64.
template <typename Fn>
void dispatch_numeric(Dtype d, Fn&& fn) {
  switch (d) {
    case Dtype::i32: fn(int32_t{}); return;
    case Dtype::i64: fn(int64_t{}); return;
    default: dispatch_float(d, fn);
  }
}

template <typename Fn>
void dispatch_index(Dtype d, Fn&& fn) {
  if (d == Dtype::i64) {
    fn(int64_t{});
  } else {
    fn(int32_t{});
  }
}

// Blocks of `threads` covering n work items, capped so grid-stride loops take the rest.
inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65535LL * 8) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

}  // namespace tern::cuda
