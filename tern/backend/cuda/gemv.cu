// Launchers of the skinny decode products (M <= 4 rows, bf16 weights), plain and gated.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/gemv.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {

unsigned gemv_grid(int64_t N) { return static_cast<unsigned>((N + kernels::kGemvWarps - 1) / kernels::kGemvWarps); }

template <int M>
void run_gemv(const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K, cudaStream_t s) {
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* wb = static_cast<const __nv_bfloat16*>(w);
  if (out_dt == Dtype::f32) {
    launch_kernel(kernels::gemv_bf16_kernel<M, float>, gemv_grid(N), kernels::kGemvWarps * 32, 0, s, xb, wb,
                  static_cast<float*>(out), N, K);
  } else {
    launch_kernel(kernels::gemv_bf16_kernel<M, __nv_bfloat16>, gemv_grid(N), kernels::kGemvWarps * 32, 0, s, xb, wb,
                  static_cast<__nv_bfloat16*>(out), N, K);
  }
}

template <int M, int ACT>
void run_gated(const void* x, const void* w, void* out, int64_t N, int64_t K, cudaStream_t s) {
  launch_kernel(kernels::gemv_gated_kernel<M, ACT>, gemv_grid(N), kernels::kGemvWarps * 32, 0, s,
                static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                static_cast<__nv_bfloat16*>(out), N, K);
}

template <int M>
bool run_gated_act(int act, const void* x, const void* w, void* out, int64_t N, int64_t K, cudaStream_t s) {
  switch (act) {
    case kernels::kSilu:
      run_gated<M, kernels::kSilu>(x, w, out, N, K, s);
      return true;
    case kernels::kGeluTanh:
      run_gated<M, kernels::kGeluTanh>(x, w, out, N, K, s);
      return true;
    case kernels::kGeluErf:
      run_gated<M, kernels::kGeluErf>(x, w, out, N, K, s);
      return true;
    default:
      return false;
  }
}

bool gemv_eligible(int64_t M, const void* x, const void* w, int64_t K) {
  return M >= 1 && M <= 4 && K % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

}  // namespace

bool launch_gemv(int64_t M, const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K,
                 cudaStream_t s) {
  if (!gemv_eligible(M, x, w, K) || (out_dt != Dtype::f32 && out_dt != Dtype::bf16)) return false;
  switch (M) {
    case 1: run_gemv<1>(x, w, out_dt, out, N, K, s); break;
    case 2: run_gemv<2>(x, w, out_dt, out, N, K, s); break;
    case 3: run_gemv<3>(x, w, out_dt, out, N, K, s); break;
    default: run_gemv<4>(x, w, out_dt, out, N, K, s); break;
  }
  return true;
}

bool launch_gemv_gated(int64_t M, int act, const void* x, const void* w, void* out, int64_t N, int64_t K,
                       cudaStream_t s) {
  if (!gemv_eligible(M, x, w, K)) return false;
  switch (M) {
    case 1:
      return run_gated_act<1>(act, x, w, out, N, K, s);
    case 2:
      return run_gated_act<2>(act, x, w, out, N, K, s);
    case 3:
      return run_gated_act<3>(act, x, w, out, N, K, s);
    default:
      return run_gated_act<4>(act, x, w, out, N, K, s);
  }
}

}  // namespace tern::cuda
