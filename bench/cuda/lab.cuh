// Shared helpers of the kernel-lab programs in this folder (each a single .cu with its own nvcc line):
// a CUDA error check, the grid-dependency controls, a launch with programmatic dependent launch (as
// tern's launch_kernel), and event timing of a call or of a captured graph's replays.
#pragma once
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

