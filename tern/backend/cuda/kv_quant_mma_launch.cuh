// run_kv_mma<HD>: the templated launcher of the tensor-core fused decode attention over packed KV rows
// (kernels/kv_quant_attention_mma.cuh) and its combine, one instance per codec pair; each head dim is
// instantiated in its own kv_quant_attention_<HD>.cu so the instances compile in parallel.
#pragma once
#include "tern/backend/cuda/kernels/kv_quant_attention_mma.cuh"
#include "tern/backend/cuda/kernels/kv_quant_prefix_mma.cuh"
#include "tern/backend/cuda/kv_quant_launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

// The widest cp.async (16, 8 or 4 bytes) that divides a packed row's size and its rows' base address.
inline int kv_copy_width(const uint8_t* rows, int row_bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(rows);
  for (int w : {16, 8}) {
    if (row_bytes % w == 0 && addr % w == 0) return w;
  }
  return 4;
}

inline int log2_of(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

template <int HD, typename KC, typename VC>
size_t kv_mma_smem(const KVAttnLaunch& p) {
  const int n_new = p.k_new ? static_cast<int>(p.L) : 0;
  return kernels::kv_mma_smem_bytes<HD, KC, VC>(kernels::kv_stage_stride(p.kc.row_bytes),
                                                kernels::kv_stage_stride(p.vc.row_bytes),
                                                kernels::kv_mma_new_rows(n_new));
}

// Blocks along a batch row: one per tile of query positions (16 / G of them for a window read).
inline int64_t kv_mma_position_tiles(const KVAttnLaunch& p) {
  if (p.L <= 1) return 1;
  const int64_t per = 16 / (p.Hq / p.Hkv);
  return (p.L + per - 1) / per;
}

// Lets Kernel have the opt-in limit of dynamic shared memory (its row layouts vary the size), once per
// kernel (a template on the kernel itself: instances of one signature share a pointer type).
template <auto Kernel>
auto with_optin_smem() {
  constexpr auto kernel = Kernel;
  static const bool configured = [] {
    int optin = 0;
    TERN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    // The opt-in limit covers the kernel's static shared memory too: the dynamic part gets the rest.
    cudaFuncAttributes attr{};
    TERN_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    TERN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         optin - static_cast<int>(attr.sharedSizeBytes)));
    return true;
  }();
  (void)configured;
  return kernel;
}

template <int HD, typename KC, typename VC, bool WINDOW = false>
auto kv_mma_kernel() {
  return with_optin_smem<kernels::kv_decode_attention_mma_kernel<__nv_bfloat16, HD, KC, VC, WINDOW>>();
}

// The decode instance, or (p.L > 1) the window read's: head dims up to 128 only (cuda::kv_decode_attention
// checks), whose decode instances leave registers for it.
template <int HD, typename KC, typename VC>
auto kv_mma_kernel_for(const KVAttnLaunch& p) {
  if constexpr (HD <= 128) {
    if (p.L > 1) return kv_mma_kernel<HD, KC, VC, true>();
  }
  return kv_mma_kernel<HD, KC, VC, false>();
}

template <int HD, typename KC, typename VC>
void run_kv_mma_codecs(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  using T = __nv_bfloat16;
  auto kernel = kv_mma_kernel_for<HD, KC, VC>(p);
  const KVAttnArgs a = kv_attn_args(p, workspace, n_splits, 1);
  const int k_stage = kernels::kv_stage_stride(p.kc.row_bytes), v_stage = kernels::kv_stage_stride(p.vc.row_bytes);
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.Hkv),
                  static_cast<unsigned>(p.B * kv_mma_position_tiles(p)));
  launch_kernel(kernel, grid, kernels::kFlashWarps * 32, kv_mma_smem<HD, KC, VC>(p), s, a, t, k_stage, v_stage,
                kv_copy_width(p.k_rows, p.kc.row_bytes), kv_copy_width(p.v_rows, p.vc.row_bytes), log2_of(p.kc.group),
                log2_of(p.vc.group));
  const int64_t rows = p.B * p.Hq * p.L;
  if (p.store_B > 0) {  // the step's store in the combine launch: 2 B Hkv more blocks
    launch_kernel(kernels::kv_attention_combine_store_kernel<T>,
                  static_cast<unsigned>(rows + 2 * p.store_B * p.store_H), 128, 0, s, workspace, n_splits, rows, HD,
                  p.vc.kind == 2, t, static_cast<T*>(p.out), p.store[0], p.store[1], p.store_B, p.store_H);
    return;
  }
  launch_kernel(kernels::kv_attention_combine_kernel<T>, static_cast<unsigned>(rows), 128, 0, s, workspace, n_splits,
                rows, HD, p.vc.kind == 2, t, static_cast<T*>(p.out));
}

// f.template operator()<KC, VC>() for TurboQuant values of p.vc.bits (2, 3, 4 or 8).
template <typename KC, typename F>
void with_turbo_values(const KVAttnLaunch& p, F&& f) {
  using namespace kernels;
  switch (p.vc.bits) {
    case 2: return f.template operator()<KC, TurboValueFrag<2>>();
    case 3: return f.template operator()<KC, TurboValueFrag<3>>();
    case 4: return f.template operator()<KC, TurboValueFrag<4>>();
    default: return f.template operator()<KC, TurboValueFrag<8>>();
  }
}

// Calls f.template operator()<KC, VC>() for the codec pair of p: the pairs the caches store
// (kv_mma_attention_supported): affine8, affine4, TurboQuant k{8,4,3}v{2,3,4,8}.
template <typename F>
void with_kv_mma_codecs(const KVAttnLaunch& p, F&& f) {
  using namespace kernels;
  if (p.kc.kind == 0) {
    if (p.kc.bits == 8) return f.template operator()<KeyFrag<8, false>, AffineValueFrag<8>>();
    return f.template operator()<KeyFrag<4, false>, AffineValueFrag<4>>();
  }
  if (p.kc.kind == 1) return with_turbo_values<KeyFrag<8, true>>(p, f);
  if (p.kc.bits == 4) return with_turbo_values<RotatedKeyFrag<4>>(p, f);
  return with_turbo_values<RotatedKeyFrag<3>>(p, f);
}

template <int HD>
void run_kv_mma(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  with_kv_mma_codecs(p, [&]<typename KC, typename VC>() {
    run_kv_mma_codecs<HD, KC, VC>(p, t, n_splits, workspace, s);
  });
}

// The stored part of a long window's read (kernels/kv_quant_prefix_mma.cuh): n_splits key splits of
// p.chunk keys write their partials to workspace (the combine is the caller's, with the window's own part).
template <int HD>
void run_kv_prefix(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  with_kv_mma_codecs(p, [&]<typename KC, typename VC>() {
    auto kernel = with_optin_smem<kernels::kv_prefix_attention_mma_kernel<__nv_bfloat16, HD, KC, VC>>();
    const int k_stage = kernels::kv_stage_stride(p.kc.row_bytes), v_stage = kernels::kv_stage_stride(p.vc.row_bytes);
    const size_t smem = kernels::kv_prefix_smem_bytes<HD, KC, VC>(k_stage, v_stage);
    const int per = kernels::kv_prefix_block_positions(static_cast<int>(p.Hq / p.Hkv));
    const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.Hkv),
                    static_cast<unsigned>(p.B * ((p.L + per - 1) / per)));
    launch_kernel(kernel, grid, kernels::kFlashWarps * 32, smem, s, kv_attn_args(p, workspace, n_splits, 1), t,
                  k_stage, v_stage, kv_copy_width(p.k_rows, p.kc.row_bytes), kv_copy_width(p.v_rows, p.vc.row_bytes),
                  log2_of(p.kc.group), log2_of(p.vc.group));
  });
}

// How many blocks of p's instance one SM holds at once.
template <int HD>
int kv_mma_blocks_per_sm(const KVAttnLaunch& p) {
  int n = 0;
  with_kv_mma_codecs(p, [&]<typename KC, typename VC>() {
    thread_local size_t smem_seen = 0;  // one query per instance and row layout, not one per layer and step
    thread_local int blocks_seen = 0;
    const size_t smem = kv_mma_smem<HD, KC, VC>(p);
    if (smem != smem_seen) {
      TERN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_seen, kv_mma_kernel_for<HD, KC, VC>(p),
                                                                    kernels::kFlashWarps * 32, smem));
      smem_seen = smem;
    }
    n = blocks_seen;
  });
  return n;
}

}  // namespace tern::cuda
