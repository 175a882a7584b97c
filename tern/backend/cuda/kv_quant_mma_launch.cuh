// run_kv_mma<HD>: the templated launcher of the tensor-core fused decode attention over packed KV rows
// (kernels/kv_quant_attention_mma.cuh) and its combine, one instance per codec pair; each head dim is
// instantiated in its own kv_quant_attention_<HD>.cu so the instances compile in parallel.
#pragma once
#include "tern/backend/cuda/kernels/kv_quant_attention_mma.cuh"
#include "tern/backend/cuda/kv_quant_launch.h"
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
void run_kv_mma_codecs(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  using T = __nv_bfloat16;
  auto kernel = kernels::kv_decode_attention_mma_kernel<T, HD, KC, VC>;
  static const bool configured = [&] {
    int optin = 0;
    TERN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    TERN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    return true;
  }();
  (void)configured;
  const KVAttnArgs a = kv_attn_args(p, workspace, n_splits, 1);
  const int k_stage = (p.kc.row_bytes + 15) / 16 * 16, v_stage = (p.vc.row_bytes + 15) / 16 * 16;
  const size_t smem = kernels::kv_mma_smem_bytes<HD>(k_stage, v_stage);
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.Hkv), static_cast<unsigned>(p.B));
  kernel<<<grid, kernels::kFlashWarps * 32, smem, s>>>(a, t, k_stage, v_stage, kv_copy_width(p.k_rows, p.kc.row_bytes),
                                                       kv_copy_width(p.v_rows, p.vc.row_bytes), log2_of(p.kc.group),
                                                       log2_of(p.vc.group));
  TERN_CUDA_CHECK_LAUNCH();
  const int64_t rows = p.B * p.Hq;
  kernels::kv_attention_combine_kernel<T><<<static_cast<unsigned>(rows), 128, 0, s>>>(
      workspace, n_splits, rows, HD, p.vc.kind == 2, t, static_cast<T*>(p.out));
  TERN_CUDA_CHECK_LAUNCH();
}

// The codec pairs the caches store (kv_mma_attention_supported): affine8, affine4, TurboQuant k8v{2,3,4,8}.
template <int HD>
void run_kv_mma(Dtype, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  using namespace kernels;
  if (p.kc.kind == 0) {
    if (p.kc.bits == 8) return run_kv_mma_codecs<HD, AffineDecode<8>, AffineDecode<8>>(p, t, n_splits, workspace, s);
    return run_kv_mma_codecs<HD, AffineDecode<4>, AffineDecode<4>>(p, t, n_splits, workspace, s);
  }
  switch (p.vc.bits) {
    case 2: return run_kv_mma_codecs<HD, TurboKeyDecode, TurboValueDecode<2>>(p, t, n_splits, workspace, s);
    case 3: return run_kv_mma_codecs<HD, TurboKeyDecode, TurboValueDecode<3>>(p, t, n_splits, workspace, s);
    case 4: return run_kv_mma_codecs<HD, TurboKeyDecode, TurboValueDecode<4>>(p, t, n_splits, workspace, s);
    default: return run_kv_mma_codecs<HD, TurboKeyDecode, TurboValueDecode<8>>(p, t, n_splits, workspace, s);
  }
}

}  // namespace tern::cuda
