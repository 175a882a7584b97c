// Launcher of the skinny decode products (M <= 4 rows, bf16 weights).
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/gemv.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {

template <int M>
void run_gemv(const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K, cudaStream_t s) {
  constexpr int kRowsPerBlock = kernels::kGemvWarps * kernels::kGemvRowsPerWarp;
  const unsigned grid = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* wb = static_cast<const __nv_bfloat16*>(w);
  if (out_dt == Dtype::f32) {
    launch_kernel(kernels::gemv_bf16_kernel<M, float>, grid, kernels::kGemvWarps * 32, 0, s, xb, wb,
                  static_cast<float*>(out), N, K);
  } else {
    launch_kernel(kernels::gemv_bf16_kernel<M, __nv_bfloat16>, grid, kernels::kGemvWarps * 32, 0, s, xb, wb,
                  static_cast<__nv_bfloat16*>(out), N, K);
  }
  TERN_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool launch_gemv(int64_t M, const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K,
                 cudaStream_t s) {
  if (M < 1 || M > 4 || K % 8 != 0 || (out_dt != Dtype::f32 && out_dt != Dtype::bf16)) return false;
  if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(w) % 16) return false;
  switch (M) {
    case 1: run_gemv<1>(x, w, out_dt, out, N, K, s); break;
    case 2: run_gemv<2>(x, w, out_dt, out, N, K, s); break;
    case 3: run_gemv<3>(x, w, out_dt, out, N, K, s); break;
    default: run_gemv<4>(x, w, out_dt, out, N, K, s); break;
  }
  return true;
}

}  // namespace tern::cuda
