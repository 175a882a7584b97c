// Column-major GEMM through cuBLASLt (the only cuBLAS user): D = op(A) op(B), f32 accumulation, with
// a plan cache keyed by everything that shapes the plan, so steady-state calls do no heuristics.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tern/core/dtype.h"

namespace tern::cuda {

// C[m, n] = op(A)[m, k] * op(B)[k, n], column-major, `batch` problems `stride_*` elements apart.
// A and B share ab_dtype (f32, bf16, f16); C is c_dtype (= ab_dtype, or f32 for bf16/f16 inputs).
struct GemmDesc {
  Dtype ab_dtype = Dtype::f32, c_dtype = Dtype::f32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// Queues the product on `stream`. Throws tern::Error on unsupported types or a cuBLASLt failure.
void gemm(const GemmDesc& desc, const void* a, const void* b, void* c, cudaStream_t stream);

// For benchmarks: the first `count` algorithms cuBLASLt's heuristic offers for `desc`, best-first, each
// as its configuration in words and its median time in us over `reps` calls on these buffers (negative
// when it fails to run), `between` (if any) queued before each call outside its timing. Synchronises the
// stream.
struct GemmAlgoTime {
  std::string config;
  float us = 0.0f;
};
std::vector<GemmAlgoTime> gemm_algo_times(const GemmDesc& desc, const void* a, const void* b, void* c,
                                          cudaStream_t stream, int count, int reps,
                                          const std::function<void()>& between = {});

}  // namespace tern::cuda
