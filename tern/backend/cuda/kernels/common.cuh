// Device helpers shared by the kernels: f32 load/store for every storage type, strided offset
// computation for up to kMaxDims dims, and warp/block reductions. Device code only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "tern/backend/cuda/kernels/layout.h"

namespace tern::cuda::kernels {

// The first statement of every kernel (see launch_kernel.cuh): waits until the previous kernel in the
// stream has finished and its writes are visible, then lets the next kernel's blocks be scheduled.
// Without a programmatic launch both are no-ops.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The most blocks a thread-block cluster holds without opting in to non-portable sizes: the bound of
// every cluster merge's peers (flash-decoding's splits, the skinny GEMM's K slices).
constexpr int kClusterMaxBlocks = 8;

// A cluster's closing barrier, whose only job is to keep each block's shared memory alive until its
// peers have read it: relaxed, so it does not wait for this thread's global stores to be acknowledged
// (cluster.sync()'s release compiles to a GPU-wide memory barrier). The caller's reads of peer memory
// must be complete before it. The PTX memory model does not order a relaxed arrive after them; what
// does is the hardware's in-order issue: every read's value must be consumed (stored) before the call,
// so the store, and the arrive after it, cannot issue before the read has returned. Callers must
// not leave a peer read unconsumed (e.g. loaded, then skipped).
__device__ __forceinline__ void cluster_release_peers() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}

// 16 bytes of weights, not kept in L1 (the activations live there): weights are read once per product,
// while every warp of a block rereads the activations.
__device__ __forceinline__ uint4 load_stream16(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes of weights through the read-only path, past L1 when NA.
template <bool NA>
__device__ __forceinline__ uint4 load_weights16(const uint4* p) {
  if constexpr (NA) {
    return load_stream16(p);
  } else {
    return __ldg(p);
  }
}

// Offset (elements) of the i-th element in row-major order of l.shape.
__device__ __forceinline__ int64_t offset_of(const Layout& l, int64_t i) {
  int64_t off = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d < l.rank) {
      int64_t s = l.shape[d];
      off += (i % s) * l.stride[d];
      i /= s;
    }
  }
  return off;
}

template <typename T> __device__ __forceinline__ float to_f32(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f32(float v) { return __float2half_rn(v); }

template <typename T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
template <> struct IsFloat<__nv_bfloat16> { static constexpr bool value = true; };
template <> struct IsFloat<__half> { static constexpr bool value = true; };

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// An RMSNorm's scale: 1 / sqrt(mean of squares + eps) for a row of d elements whose squares sum to ss.
// Every norm kernel takes it from here, so fused and separate norms give the same numbers.
__device__ __forceinline__ float inv_rms(float ss, int64_t d, float eps) {
  return rsqrtf(ss / static_cast<float>(d) + eps);
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < n_warps ? red[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < n_warps ? red[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace tern::cuda::kernels
