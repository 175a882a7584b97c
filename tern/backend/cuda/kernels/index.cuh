// Embedding gather: one block per id, the row converted to the output type; scatter_rows, its
// inverse: one block per id, out-of-range ids skipped.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/index_args.h"

namespace tern::cuda::kernels {

template <typename T, typename I, typename O>
__global__ void embedding_kernel(const T* __restrict__ table, int64_t V, int64_t D, const I* __restrict__ ids,
                                 O* __restrict__ out, int32_t* __restrict__ bad) {
  grid_dependency_wait();
  const int64_t id = static_cast<int64_t>(ids[blockIdx.x]);
  O* row = out + blockIdx.x * D;
  if (id < 0 || id >= V) {
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) row[j] = from_f32<O>(0.0f);
    if (threadIdx.x == 0) *bad = 1;
    return;
  }
  const T* src = table + id * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) row[j] = from_f32<O>(to_f32(src[j]));
}

// One block per (batch row, head): copies src's row into dst at positions[b] along dim 2. E is an
// unsigned type of the element size; strides in elements.
// dst[b, h, positions[b], :] = src[b, h, 0, :] for one or two (dst, src) pairs (a layer's keys and
// values): blockIdx.x over (b, h), blockIdx.y over the pairs.
template <typename E>
__global__ void write_positions_kernel(PositionWrites w, const int32_t* __restrict__ positions) {
  grid_dependency_wait();
  const PositionWrites::One& a = w.pair[blockIdx.y];
  const int64_t b = blockIdx.x / a.H, h = blockIdx.x % a.H;
  int64_t p = positions[b];
  if (p < 0) return;
  if (w.ring > 0) p %= w.ring;
  if (p >= a.N) return;
  E* d = static_cast<E*>(a.dst) + b * a.ds[0] + h * a.ds[1] + p * a.ds[2];
  const E* s = static_cast<const E*>(a.src) + b * a.ss[0] + h * a.ss[1];
  for (int64_t j = threadIdx.x; j < a.D; j += blockDim.x) d[j * a.ds[3]] = s[j * a.ss[3]];
}

template <typename T, typename I>
__global__ void scatter_rows_kernel(T* __restrict__ table, int64_t V, int64_t D, const I* __restrict__ ids,
                                    const T* __restrict__ rows) {
  grid_dependency_wait();
  const int64_t id = static_cast<int64_t>(ids[blockIdx.x]);
  if (id < 0 || id >= V) return;
  const T* src = rows + blockIdx.x * D;
  T* dst = table + id * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) dst[j] = src[j];
}

}  // namespace tern::cuda::kernels
