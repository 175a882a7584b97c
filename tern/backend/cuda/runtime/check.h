// TERN_CUDA_CHECK: wraps every CUDA runtime call (launch_kernel checks each launch with it), throwing
// tern::Error with the call and the CUDA message. Usable from .cu files (no fmt, no tern headers).
#pragma once
#include <cuda_runtime_api.h>

namespace tern::cuda {

// Throws tern::Error("[cuda] <expr> failed: <name>: <message> at file:line").
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
// Throws tern::Error("[cuda] <what> does not support dtype <name>") (dtype: a tern::Dtype value).
[[noreturn]] void throw_unsupported_dtype(const char* what, int dtype);

}  // namespace tern::cuda

#define TERN_CUDA_CHECK(expr)                                                      \
  do {                                                                             \
    cudaError_t tern_err_ = (expr);                                                \
    if (tern_err_ != cudaSuccess) [[unlikely]] {                                   \
      ::tern::cuda::throw_cuda_error(tern_err_, #expr, __FILE__, __LINE__);         \
    }                                                                              \
  } while (0)

