// Launchers of the skinny decode products (M <= 4 rows, bf16 weights): plain and gated.
#include <type_traits>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/gemv.cuh"
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
    auto go = [&](auto na, auto* o) {
      launch_kernel(kernels::gemv_bf16_kernel<M, kW, kU, std::remove_pointer_t<decltype(o)>, decltype(na)::value>,
                    gemv_grid(N, kW), kernels::kGemvWarps * 32, 0, s, xb, wb, o, N, K);
    };
    auto into = [&](auto* o) {
      if constexpr (M == 1) {
        if (weights_past_l1()) return go(std::true_type{}, o);
      }
      go(std::false_type{}, o);
    };
    if (out_dt == Dtype::f32) {
      into(static_cast<float*>(out));
    } else {
      into(static_cast<__nv_bfloat16*>(out));
    }
  });
}

template <int M, int ACT>
void run_gated(const void* x, const void* w, void* out, int64_t N, int64_t K, cudaStream_t s) {
  // each row is two products (gate and up): half the rows give the same warp count
  const GemvShape g = gemv_shape(2 * N, K);
  with_shape(g.W, g.U, [&](auto Wc, auto Uc) {
    constexpr int kW = decltype(Wc)::value, kU = decltype(Uc)::value;
    auto go = [&](auto na) {
      launch_kernel(kernels::gemv_gated_kernel<M, kW, kU, ACT, decltype(na)::value>, gemv_grid(N, kW),
                    kernels::kGemvWarps * 32, 0, s, static_cast<const __nv_bfloat16*>(x),
                    static_cast<const __nv_bfloat16*>(w), static_cast<__nv_bfloat16*>(out), N, K);
    };
    if constexpr (M == 1) {
      if (weights_past_l1()) return go(std::true_type{});
    }
    go(std::false_type{});
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
