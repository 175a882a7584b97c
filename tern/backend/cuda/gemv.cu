// Launchers of the skinny decode products (M <= 4 rows, bf16 weights): plain, gated, and either one
// behind its input's RMSNorm.
#include <cstdlib>
#include <cstring>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/gemv.cuh"
#include "tern/backend/cuda/kernels/norm_gemv.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {

// The kernel's shape for an N x K product. W, warps per output row: enough that the grid has about
// 4,096 warps (a third of an H200's), so a short N (0.6B's o_proj and down: 1,024 rows) still keeps the
// memory system busy. U, 16-byte loads in flight per lane: 8 where the row's share of each warp is long
// enough to fill them (Qwen3-8B's rows: +4% at batch 1 over 4), else 4.
struct GemvShape {
  int W, U;
};
GemvShape gemv_shape(int64_t N, int64_t K) {
  int W = 1;
  while (W < 4 && N * W < 4096 && K / 8 >= 64 * W) W *= 2;
  return {W, kernels::gemv_depth(K, W)};
}

unsigned gemv_grid(int64_t N, int W) {
  const int rows = kernels::kGemvWarps / W;
  return static_cast<unsigned>((N + rows - 1) / rows);
}

template <typename F>
void with_shape(int W, int U, F&& f) {
  auto u = [&](auto w) {
    if (U == 8) {
      f(w, std::integral_constant<int, 8>{});
    } else {
      f(w, std::integral_constant<int, 4>{});
    }
  };
  if (W == 4) {
    u(std::integral_constant<int, 4>{});
  } else if (W == 2) {
    u(std::integral_constant<int, 2>{});
  } else {
    u(std::integral_constant<int, 1>{});
  }
}

template <int M>
void run_gemv(const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K, cudaStream_t s) {
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* wb = static_cast<const __nv_bfloat16*>(w);
  const GemvShape g = gemv_shape(N, K);
  with_shape(g.W, g.U, [&](auto Wc, auto Uc) {
    constexpr int kW = decltype(Wc)::value, kU = decltype(Uc)::value;
    if (out_dt == Dtype::f32) {
      launch_kernel(kernels::gemv_bf16_kernel<M, kW, kU, float>, gemv_grid(N, kW), kernels::kGemvWarps * 32, 0, s, xb,
                    wb, static_cast<float*>(out), N, K);
    } else {
      launch_kernel(kernels::gemv_bf16_kernel<M, kW, kU, __nv_bfloat16>, gemv_grid(N, kW), kernels::kGemvWarps * 32, 0,
                    s, xb, wb, static_cast<__nv_bfloat16*>(out), N, K);
    }
  });
}

template <int M, int ACT>
void run_gated(const void* x, const void* w, void* out, int64_t N, int64_t K, cudaStream_t s) {
  // each row is two products (gate and up): half the rows give the same warp count
  const GemvShape g = gemv_shape(2 * N, K);
  with_shape(g.W, g.U, [&](auto Wc, auto Uc) {
    constexpr int kW = decltype(Wc)::value, kU = decltype(Uc)::value;
    launch_kernel(kernels::gemv_gated_kernel<M, kW, kU, ACT>, gemv_grid(N, kW), kernels::kGemvWarps * 32, 0, s,
                  static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                  static_cast<__nv_bfloat16*>(out), N, K);
  });
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

template <int M, int ACT, int NW>
void run_norm_gemv_nw(const NormGemvArgs& a, int64_t N, int64_t K, int64_t warps_rows, cudaStream_t s) {
  const GemvShape g = gemv_shape(warps_rows, K);
  with_shape(g.W, g.U, [&](auto Wc, auto Uc) {
    constexpr int kW = decltype(Wc)::value, kU = decltype(Uc)::value;
    launch_kernel(kernels::norm_gemv_kernel<M, kW, kU, ACT, NW>, static_cast<unsigned>((N + NW / kW - 1) / (NW / kW)),
                  NW * 32, static_cast<size_t>(M * K) * 2, s, static_cast<const __nv_bfloat16*>(a.x),
                  static_cast<const __nv_bfloat16*>(a.delta), static_cast<__nv_bfloat16*>(a.sum),
                  static_cast<const __nv_bfloat16*>(a.weight), a.eps, static_cast<const __nv_bfloat16*>(a.w),
                  static_cast<__nv_bfloat16*>(a.out), N, K);
  });
}

// Every block re-reads the rows and their norm weight from L2 and reduces them before its first weight
// load, so long rows take wide blocks, whose prologue serves 16 warps' products. Measured on the H200
// (tern_cuda_bench --gemv, a batch-1 layer's products, against the separate add+norm launches): at K =
// 4,096 (Qwen3-8B) 4-warp blocks lose, 119.3 against 110.8 us per layer, and 16-warp blocks win, 104.6
// (batch-1 decode 206.5 -> 217.2 tok/s); at K = 1,024 (Qwen3-0.6B) 4-warp blocks win, 19.9 against 23.3
// us (800 -> 937 tok/s), where 16-warp ones are slower (23.8). Sizes between are not measured.
// TERN_CUDA_NORM_GEMV_WARPS=4|16 forces one block width (for benchmarks; read once).
template <int M, int ACT>
void run_norm_gemv(const NormGemvArgs& a, int64_t N, int64_t K, int64_t warps_rows, cudaStream_t s) {
  static const int forced = [] {
    const char* e = std::getenv("TERN_CUDA_NORM_GEMV_WARPS");
    return e ? std::atoi(e) : 0;
  }();
  if (forced ? forced == 16 : K >= 4096) {
    run_norm_gemv_nw<M, ACT, 16>(a, N, K, warps_rows, s);
  } else {
    run_norm_gemv_nw<M, ACT, 4>(a, N, K, warps_rows, s);
  }
}

template <int M>
bool run_norm_gemv_act(const NormGemvArgs& a, int64_t N, int64_t K, cudaStream_t s) {
  switch (a.act) {
    case -1:
      run_norm_gemv<M, -1>(a, N, K, N, s);
      return true;
    case kernels::kSilu:
      run_norm_gemv<M, kernels::kSilu>(a, N, K, 2 * N, s);
      return true;
    case kernels::kGeluTanh:
      run_norm_gemv<M, kernels::kGeluTanh>(a, N, K, 2 * N, s);
      return true;
    case kernels::kGeluErf:
      run_norm_gemv<M, kernels::kGeluErf>(a, N, K, 2 * N, s);
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

// Off by default: the caller runs the add+norm and the GEMV as two launches. In whole batch-1 decode
// steps on the H200 (2026-12-03, one build, TERN_CUDA_NORM_GEMV=1 against unset) the separate pair won
// at both sizes measured, although tern_cuda_bench --gemv times the fused products faster at 0.6B:
// Qwen3-0.6B 982.7 against 886.5 / 888.3 tok/s fused, Qwen3-8B 218.3 against 212.0 / 211.9.
// TERN_CUDA_NORM_GEMV=1 takes the fused kernel wherever it fits (for benchmarks; read once).
bool launch_norm_gemv(int64_t M, const NormGemvArgs& a, int64_t N, int64_t K, cudaStream_t s) {
  static const bool off = [] {
    const char* e = std::getenv("TERN_CUDA_NORM_GEMV");
    return !(e && std::strcmp(e, "1") == 0);
  }();
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (off || !gemv_eligible(M, a.x, a.w, K) || M * K * 2 > 48 * 1024 || !aligned(a.delta) || !aligned(a.sum) ||
      !aligned(a.weight) || !aligned(a.out))
    return false;
  switch (M) {
    case 1:
      return run_norm_gemv_act<1>(a, N, K, s);
    case 2:
      return run_norm_gemv_act<2>(a, N, K, s);
    case 3:
      return run_norm_gemv_act<3>(a, N, K, s);
    default:
      return run_norm_gemv_act<4>(a, N, K, s);
  }
}

}  // namespace tern::cuda
