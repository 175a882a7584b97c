// launch_kernel: every tern kernel launch. Each launch allows programmatic dependent launch (Hopper): the
// kernel's blocks may be scheduled while the previous kernel in the stream drains, and wait in
// kernels::grid_dependency_wait() (the first statement of every kernel) until that kernel has finished
// and its writes are visible. What it saves is the gap between dependent kernels, which dominates a
// decode step of small kernels; captured graphs keep the programmatic edges. TERN_CUDA_PDL=0 turns it
// off (plain stream order), for comparison.
#pragma once
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

inline bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TERN_CUDA_PDL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// Whether batch-1 decode products load their weights past L1 (kernels::load_stream16), so L1 keeps
// the activations every warp rereads: measured faster at Qwen3-8B and 30B-A3B dimensions (bench/RESULTS.md,
// 2026-12-04). TERN_CUDA_GEMV_NA=0 loads them through L1 as before, for comparison.
inline bool weights_past_l1() {
  static const bool on = [] {
    const char* v = std::getenv("TERN_CUDA_GEMV_NA");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// cluster_x > 1: the grid runs as thread-block clusters of cluster_x blocks along x (sm_90), which must
// divide grid.x.
template <typename... Params, typename... Args>
void launch_kernel_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                            unsigned cluster_x, Args&&... args) {
  cudaLaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (pdl_enabled()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n++].val.clusterDim = {cluster_x, 1, 1};
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  TERN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  launch_kernel_clusters(kernel, grid, block, smem, s, 1, std::forward<Args>(args)...);
}

}  // namespace tern::cuda
