// Launchers of the mixture-of-experts kernels: the grouped decode GEMVs, the counting sort by expert and
// the weighted combine of the prefill path.
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/moe.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

bool launch_moe_decode(const void* x, const int32_t* experts, const float* weights, int64_t T, int64_t k,
                       const void* gate_up, const void* down, int64_t E, int64_t H, int64_t I, bool geglu, float* h,
                       void* out, bool out_bf16, cudaStream_t s) {
  if (H % 8 != 0 || I % 8 != 0) return false;
  for (const void* p : {x, gate_up, down, static_cast<const void*>(h)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16) return false;
  }
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* gu = static_cast<const __nv_bfloat16*>(gate_up);
  const dim3 up_grid(static_cast<unsigned>((I + kernels::kMoeWarps - 1) / kernels::kMoeWarps),
                     static_cast<unsigned>(T * k));
  // One token (batch-1 decode): the experts' weights past L1, as the dense products (weights_past_l1).
  const bool na = T == 1 && weights_past_l1();
  // 8 loads in flight per lane where a row fills them (Qwen3-30B-A3B's gate/up rows of 2,048), else 4
  // (kernels::gemv_depth)
  auto gate_up_with = [&](auto u) {
    constexpr int U = decltype(u)::value;
    if (geglu) {
      launch_kernel(na ? kernels::moe_gate_up_kernel<true, U, true> : kernels::moe_gate_up_kernel<true, U, false>,
                    up_grid, kernels::kMoeWarps * 32, 0, s, xb, experts, k, gu, E, H, I, h);
    } else {
      launch_kernel(na ? kernels::moe_gate_up_kernel<false, U, true> : kernels::moe_gate_up_kernel<false, U, false>,
                    up_grid, kernels::kMoeWarps * 32, 0, s, xb, experts, k, gu, E, H, I, h);
    }
  };
  if (kernels::gemv_depth(H, 1) == 8) {
    gate_up_with(std::integral_constant<int, 8>{});
  } else {
    gate_up_with(std::integral_constant<int, 4>{});
  }
  const dim3 down_grid(static_cast<unsigned>(H), static_cast<unsigned>(T));
  const auto* dn = static_cast<const __nv_bfloat16*>(down);
  auto down_with = [&](auto u, auto* o) {
    constexpr int U = decltype(u)::value;
    using O = std::remove_pointer_t<decltype(o)>;
    launch_kernel(na ? kernels::moe_down_kernel<U, O, true> : kernels::moe_down_kernel<U, O, false>, down_grid,
                  kernels::kMoeWarps * 32, 0, s, h, experts, weights, k, dn, E, H, I, o);
  };
  auto down_into = [&](auto* o) {
    if (kernels::gemv_depth(I, 1) == 8) {
      down_with(std::integral_constant<int, 8>{}, o);
    } else {
      down_with(std::integral_constant<int, 4>{}, o);
    }
  };
  if (out_bf16) {
    down_into(static_cast<__nv_bfloat16*>(out));
  } else {
    down_into(static_cast<float*>(out));
  }
  return true;
}

void launch_moe_sort(const int32_t* experts, int64_t P, int64_t k, int64_t E, int32_t* counts, int32_t* offsets,
                     int32_t* cursor, int32_t* rows, int32_t* pos, cudaStream_t s) {
  constexpr int kThreads = 256;
  TERN_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(E) * sizeof(int32_t), s));
  launch_kernel(kernels::moe_count_kernel, grid_for(P, kThreads), kThreads, 0, s, experts, P, E, counts);
  launch_kernel(kernels::moe_offsets_kernel, 1, 1, 0, s, counts, E, offsets, cursor);
  launch_kernel(kernels::moe_place_kernel, grid_for(P, kThreads), kThreads, 0, s, experts, P, k, E, cursor, rows, pos);
}

void launch_moe_combine(const float* y, const int32_t* pos, const float* weights, int64_t T, int64_t k, int64_t H,
                        void* out, bool out_bf16, cudaStream_t s) {
  constexpr int kThreads = 256;
  if (out_bf16) {
    launch_kernel(kernels::moe_combine_kernel<__nv_bfloat16>, grid_for(T * H, kThreads), kThreads, 0, s, y, pos,
                  weights, T, k, H, static_cast<__nv_bfloat16*>(out));
  } else {
    launch_kernel(kernels::moe_combine_kernel<float>, grid_for(T * H, kThreads), kThreads, 0, s, y, pos, weights, T, k,
                  H, static_cast<float*>(out));
  }
}

bool launch_moe_grouped(const void* x, const int32_t* experts, const float* weights, int64_t T, int64_t k,
                        const void* gate_up, const void* down, int64_t E, int64_t H, int64_t I, bool geglu,
                        const MoeGroupedScratch& w, void* out, bool out_bf16, cudaStream_t s) {
  if (H % 8 != 0 || I % 8 != 0 || E > 65535) return false;
  for (const void* p : {x, gate_up, down, static_cast<const void*>(w.h), static_cast<const void*>(w.y)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16) return false;
  }
  launch_moe_sort(experts, T * k, k, E, w.counts, w.offsets, w.cursor, w.rows, w.pos, s);
  const auto* xb = static_cast<const __nv_bfloat16*>(x);
  const auto* gu = static_cast<const __nv_bfloat16*>(gate_up);
  const dim3 up_grid(static_cast<unsigned>((I + kernels::kMoeWarps - 1) / kernels::kMoeWarps),
                     static_cast<unsigned>(E));
  if (geglu) {
    launch_kernel(kernels::moe_grouped_gate_up_kernel<true>, up_grid, kernels::kMoeWarps * 32, 0, s, xb,
                  static_cast<const int32_t*>(w.counts), static_cast<const int32_t*>(w.offsets),
                  static_cast<const int32_t*>(w.rows), gu, H, I, w.h);
  } else {
    launch_kernel(kernels::moe_grouped_gate_up_kernel<false>, up_grid, kernels::kMoeWarps * 32, 0, s, xb,
                  static_cast<const int32_t*>(w.counts), static_cast<const int32_t*>(w.offsets),
                  static_cast<const int32_t*>(w.rows), gu, H, I, w.h);
  }
  const dim3 down_grid(static_cast<unsigned>((H + kernels::kMoeWarps - 1) / kernels::kMoeWarps),
                       static_cast<unsigned>(E));
  launch_kernel(kernels::moe_grouped_down_kernel, down_grid, kernels::kMoeWarps * 32, 0, s,
                static_cast<const float*>(w.h), static_cast<const int32_t*>(w.counts),
                static_cast<const int32_t*>(w.offsets), static_cast<const __nv_bfloat16*>(down), H, I, w.y);
  launch_moe_combine(w.y, w.pos, weights, T, k, H, out, out_bf16, s);
  return true;
}

namespace {

// Calls pick(m, epl) with integral constants for M rows (1-4) and EPL router logits a lane (1, 2, 4 or 8:
// E <= 32 EPL experts), the template arguments of both norm-route kernels.
template <typename Pick>
void with_route_instance(int64_t M, int64_t E, Pick pick) {
  auto with_m = [&](auto epl) {
    switch (M) {
      case 1:
        return pick(std::integral_constant<int, 1>{}, epl);
      case 2:
        return pick(std::integral_constant<int, 2>{}, epl);
      case 3:
        return pick(std::integral_constant<int, 3>{}, epl);
      default:
        return pick(std::integral_constant<int, 4>{}, epl);
    }
  };
  if (E <= 32)
    with_m(std::integral_constant<int, 1>{});
  else if (E <= 64)
    with_m(std::integral_constant<int, 2>{});
  else if (E <= 128)
    with_m(std::integral_constant<int, 4>{});
  else
    with_m(std::integral_constant<int, 8>{});
}

}  // namespace

bool launch_moe_norm_route(const void* x, const void* delta, void* sum, const void* weight, float eps,
                           const void* router, int64_t M, int64_t E, int64_t H, void* normed, float* logits, int64_t k,
                           bool renormalize, float* weights, int32_t* experts, unsigned* done, cudaStream_t s) {
  if (M < 1 || M > 4 || E > 256 || k > 32 || H % 8 != 0) return false;
  for (const void* p : {x, delta, static_cast<const void*>(sum), weight, router, static_cast<const void*>(normed)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16) return false;
  }
  using bf = __nv_bfloat16;
  const bf* xb = static_cast<const bf*>(x);
  const bf* db = static_cast<const bf*>(delta);
  const bf* wb = static_cast<const bf*>(weight);
  const bf* rb = static_cast<const bf*>(router);
  // One cluster of kRouteBlocks blocks where clusters exist (sm_90), unless TERN_CUDA_MOE_ROUTE=atomic
  // asks for the grid that routes in its last block (for benchmarks and tests).
  const char* route_env = std::getenv("TERN_CUDA_MOE_ROUTE");
  const bool cluster = device_props().major >= 9 && !(route_env && std::strcmp(route_env, "atomic") == 0);
  const size_t smem =
      static_cast<size_t>(M * H) * sizeof(bf) + (cluster ? static_cast<size_t>(M * E) * sizeof(float) : 0);
  auto allow_smem = [&](auto kernel) {
    if (smem > 48 * 1024) {
      TERN_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    }
  };
  if (cluster) {
    with_route_instance(M, E, [&](auto m, auto epl) {
      auto kernel = kernels::moe_norm_route_cluster_kernel<decltype(m)::value, decltype(epl)::value>;
      allow_smem(kernel);
      launch_kernel_clusters(kernel, dim3(kernels::kRouteBlocks), dim3(kernels::kRouteClusterWarps * 32), smem, s,
                             kernels::kRouteBlocks, xb, db, static_cast<bf*>(sum), wb, eps, rb, E, H,
                             static_cast<bf*>(normed), logits, static_cast<int>(k), renormalize, weights, experts);
    });
    return true;
  }
  constexpr int rows_per_block = kernels::kMoeWarps / kernels::kRouterW;
  const auto grid = static_cast<unsigned>((E + rows_per_block - 1) / rows_per_block);
  with_route_instance(M, E, [&](auto m, auto epl) {
    auto kernel = kernels::moe_norm_route_kernel<decltype(m)::value, decltype(epl)::value>;
    allow_smem(kernel);
    launch_kernel(kernel, grid, kernels::kMoeWarps * 32, smem, s, xb, db, static_cast<bf*>(sum), wb, eps, rb, E, H,
                  static_cast<bf*>(normed), logits, static_cast<int>(k), renormalize, weights, experts, done);
  });
  return true;
}

void launch_moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool renormalize, float* weights,
                      int32_t* experts, cudaStream_t s) {
  const auto grid = static_cast<unsigned>((T + kernels::kRouteWarps - 1) / kernels::kRouteWarps);
  auto go = [&](auto kernel) {
    launch_kernel(kernel, grid, kernels::kRouteWarps * 32, 0, s, logits, T, static_cast<int>(E), static_cast<int>(k),
                  renormalize, weights, experts);
  };
  if (E <= 32)
    go(kernels::moe_route_kernel<1>);
  else if (E <= 64)
    go(kernels::moe_route_kernel<2>);
  else if (E <= 128)
    go(kernels::moe_route_kernel<4>);
  else if (E <= 256)
    go(kernels::moe_route_kernel<8>);
  else if (E <= 512)
    go(kernels::moe_route_kernel<16>);
  else
    go(kernels::moe_route_kernel<32>);
}

}  // namespace tern::cuda
