// Launcher of the batch-1 pre-norm GEMV (kernels/gemv_norm.cuh): plain and gated.
#include "tern/backend/cuda/kernels/gemv_norm.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"

namespace tern::cuda {
namespace {

template <int CH, int ACT>
void run(const void* x, const void* delta, void* sum, const void* g, float eps, const void* w, void* out, int64_t N,
         int64_t K, cudaStream_t s) {
  using B = __nv_bfloat16;
  launch_kernel(kernels::gemv_norm_kernel<CH, ACT, true>,
                static_cast<unsigned>((N + kernels::kGemvWarps - 1) / kernels::kGemvWarps), kernels::kGemvWarps * 32,
                0, s, static_cast<const B*>(x), static_cast<const B*>(delta), static_cast<const B*>(g), eps,
                static_cast<B*>(sum), static_cast<const B*>(w), static_cast<B*>(out), N, K);
}

template <int CH>
bool run_act(int act, const void* x, const void* delta, void* sum, const void* g, float eps, const void* w, void* out,
             int64_t N, int64_t K, cudaStream_t s) {
  switch (act) {
    case -1: run<CH, -1>(x, delta, sum, g, eps, w, out, N, K, s); return true;
    case kernels::kSilu: run<CH, kernels::kSilu>(x, delta, sum, g, eps, w, out, N, K, s); return true;
    case kernels::kGeluTanh: run<CH, kernels::kGeluTanh>(x, delta, sum, g, eps, w, out, N, K, s); return true;
    case kernels::kGeluErf: run<CH, kernels::kGeluErf>(x, delta, sum, g, eps, w, out, N, K, s); return true;
    default: return false;
  }
}

bool aligned(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Every warp repeats the row's norm (about 150 instructions a lane), so a grid of many warps spends more
// issue on it than the norm launch it saves (estimated at about 0.14 ns a warp against about 2 us):
// outputs past this (an LM head's 151,936) keep the two launches.
constexpr int64_t kGemvNormMaxOutputs = 8192;

}  // namespace

bool launch_gemv_norm(int act, const void* x, const void* delta, void* sum, const void* g, float eps, const void* w,
                      void* out, int64_t N, int64_t K, cudaStream_t s) {
  if (N < 1 || N > kGemvNormMaxOutputs || K < 8 || K % 8 != 0 || K > 32 * 8 * kernels::kGemvNormChunks ||
      !weights_past_l1())
    return false;
  if (!aligned(x) || !aligned(delta) || !aligned(sum) || !aligned(g) || !aligned(w)) return false;
  if (K <= 32 * 8 * 4) return run_act<4>(act, x, delta, sum, g, eps, w, out, N, K, s);
  return run_act<kernels::kGemvNormChunks>(act, x, delta, sum, g, eps, w, out, N, K, s);
}

}  // namespace tern::cuda
