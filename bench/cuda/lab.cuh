// Shared helpers of the kernel-lab programs in this folder (each a single .cu with its own nvcc line):
// a CUDA error check, the grid-dependency controls, warp reductions, bf16 vector helpers, a random
// fill, a launch with programmatic dependent launch (as tern's launch_kernel), and event timing of a
// call or of a captured graph's replays.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The 8 bf16 of a 16-byte vector as f32.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x, f[2 * i + 1] = t.y;
  }
}

// The dot product of two vectors of 8 bf16, in f32.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 fa = __bfloat1622float2(pa[j]), fb = __bfloat1622float2(pb[j]);
    s += fa.x * fb.x + fa.y * fb.y;
  }
  return s;
}

// This lane's walk over a weight row of `chunks` chunks of 8 bf16 from chunk `from` (it takes from + lane,
// + 32, ...), 4 evict-first loads in flight: chunk(a, c) for each of its chunks c in order, a its weights.
template <typename F>
__device__ __forceinline__ void stream_row(const uint4* w, int from, int chunks, F&& chunk) {
  for (int c0 = from + (threadIdx.x & 31); c0 < chunks; c0 += 32 * 4) {
    uint4 a[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) a[u] = c0 + 32 * u < chunks ? __ldcs(w + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (c0 + 32 * u < chunks) chunk(a[u], c0 + 32 * u);
  }
}

// p[i] = scale * u, u uniform in [-1, 1) from a hash of i and seed (the same values on every run).
__global__ void fill_random(__nv_bfloat16* p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16(scale * ((h & 0xffff) / 32768.0f - 1.0f));
  }
}

// Launches k with the programmatic-stream-serialization attribute (its blocks may start while the
// previous kernel drains; the kernel's pdl_wait() orders it).
template <typename... Pr, typename... A>
static void launch(void (*k)(Pr...), dim3 grid, int block, cudaStream_t s, A... args) {
  cudaLaunchAttribute at[1]{};
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

// us per call of `once` (3 untimed calls, then 20 timed ones on stream s).
template <typename F>
static double time_us(F&& once, cudaStream_t s) {
  for (int i = 0; i < 3; ++i) once();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int reps = 20;
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) once();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1e3 / reps;
}

// us per replay of a captured graph (time_us); frees the graph.
static double replay_us(cudaGraph_t g, cudaStream_t s) {
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  const double us = time_us([&] { CK(cudaGraphLaunch(ge, s)); }, s);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return us;
}

