// run_flash<HD, BN[, HDV, MT]> / run_decode<HD, BN, STAGES[, HDV]>: the templated launchers of the tensor-core prefill
// and decode kernels; each head dim is instantiated in its own attention_flash_<HD>.cu so the instances
// compile in parallel. With HDV < Dv each runs once per HDV-wide slice of the values.
#pragma once
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/attention_decode.cuh"
#include "tern/backend/cuda/kernels/attention_flash.cuh"
#include "tern/backend/cuda/kernels/attention_rows.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

template <typename T, int HD, int BN, int HDV, int MT>
void run_flash_typed(const SdpaParams& p, cudaStream_t s) {
  constexpr int kM = kernels::flash_rows<MT>();
  constexpr size_t smem = ((kM + 2 * BN) * (HD + 8) + 2 * BN * (HDV + 8)) * sizeof(T);
  constexpr auto kernel = kernels::attention_flash_kernel<T, HD, BN, HDV, MT>;
  static const bool configured = [] {
    TERN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  kernels::FlashArgs a{};
  copy_sdpa_common(a, p);
  a.os = p.Dv;
  a.partial = p.partial;
  const int64_t blocks = (p.Lq + kM - 1) / kM;
  dim3 grid(static_cast<unsigned>(p.Hq), static_cast<unsigned>(blocks), static_cast<unsigned>(p.B));
  for (int64_t c = 0; c < p.Dv; c += HDV) {  // the value slices [c, c + HDV)
    a.v = static_cast<const T*>(p.v) + c;
    a.out = static_cast<T*>(p.out) + c;
    launch_kernel(kernel, grid, kernels::kFlashWarps * 32, smem, s, a);
  }
}

template <int HD, int BN, int HDV = HD, int MT = 1>
void run_flash(Dtype dt, const SdpaParams& p, cudaStream_t s) {
  if (dt == Dtype::bf16) {
    run_flash_typed<__nv_bfloat16, HD, BN, HDV, MT>(p, s);
  } else {
    run_flash_typed<__half, HD, BN, HDV, MT>(p, s);
  }
}

static_assert(kDecodeClusterSplits == kernels::kDecodeClusterMax);

template <typename T, int HD, int BN, int STAGES, int HDV>
struct DecodeKernel {
  static constexpr size_t q_bytes = 16 * (HD + 8) * sizeof(T);
  static constexpr size_t kv_bytes = kernels::kFlashWarps * STAGES * BN * (HD + 8 + HDV + 8) * sizeof(T);
  // decode_merge's scratch, and past it the cluster merge's (head dims <= 128 only)
  static constexpr size_t merge_bytes =
      (kernels::kFlashWarps * 16 * 2 + kernels::kFlashWarps * 16 * HDV +
       (HDV <= 128 ? kernels::decode_cluster_floats<HDV>() : 0)) *
      sizeof(float);
  static constexpr size_t smem = q_bytes + (kv_bytes > merge_bytes ? kv_bytes : merge_bytes);
  static_assert(merge_bytes >= 64 * 16 * 2 * sizeof(float), "merge_split_partials' scratch");
  static constexpr auto kernel = kernels::attention_decode_kernel<T, HD, BN, STAGES, HDV>;
  // The kernel's shared-memory limit, set once; returns how many of its blocks one SM holds.
  static int blocks_per_sm() {
    static const int n = [] {
      TERN_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      int blocks = 0;
      TERN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kernels::kFlashWarps * 32, smem));
      return blocks;
    }();
    return n;
  }
};

template <typename T, int HD, int BN, int STAGES, int HDV>
void run_decode_typed(const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  using K = DecodeKernel<T, HD, BN, STAGES, HDV>;
  (void)K::blocks_per_sm();  // sets the kernel's shared-memory limit on first use
  kernels::DecodeArgs a{};
  copy_sdpa_common(a, p);
  a.os = p.Dv;
  a.partial = workspace;
  a.fresh_keys = p.fresh_keys;
  a.n_splits = n_splits;
  a.cluster = p.cluster_splits && HDV <= 128;  // the caller asks only for 2..kDecodeClusterMax splits
  a.counters = n_splits > 1 && !a.cluster ? counters : nullptr;
  dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.Hkv), static_cast<unsigned>(p.B));
  const int64_t rows = p.B * p.Hq * p.Lq;
  // The value slices [c, c + HDV) one after the other; each reuses the workspace (rows of HDV + 2).
  for (int64_t c = 0; c < p.Dv; c += HDV) {
    a.v = static_cast<const T*>(p.v) + c;
    a.out = static_cast<T*>(p.out) + c;
    launch_kernel_clusters(K::kernel, grid, kernels::kFlashWarps * 32, K::smem, s, a.cluster ? n_splits : 1, a);
    if (n_splits > 1 && !a.counters && !a.cluster) {
      launch_kernel(kernels::attention_combine_kernel<T>, static_cast<unsigned>(rows), 128, 0, s, workspace,
                    static_cast<T*>(a.out), rows, static_cast<int64_t>(HDV), n_splits, p.Dv);
    }
  }
}

template <int HD, int BN, int STAGES, int HDV = HD>
void run_decode(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  if (dt == Dtype::bf16) {
    run_decode_typed<__nv_bfloat16, HD, BN, STAGES, HDV>(p, n_splits, workspace, counters, s);
  } else {
    run_decode_typed<__half, HD, BN, STAGES, HDV>(p, n_splits, workspace, counters, s);
  }
}

template <int HD, int BN, int STAGES, int HDV = HD>
int decode_blocks_per_sm(Dtype dt) {
  return dt == Dtype::bf16 ? DecodeKernel<__nv_bfloat16, HD, BN, STAGES, HDV>::blocks_per_sm()
                           : DecodeKernel<__half, HD, BN, STAGES, HDV>::blocks_per_sm();
}

void run_flash_64(Dtype dt, const SdpaParams& p, cudaStream_t s);
void run_flash_128(Dtype dt, const SdpaParams& p, cudaStream_t s);
void run_flash_256(Dtype dt, const SdpaParams& p, cudaStream_t s);
void run_flash_512(Dtype dt, const SdpaParams& p, cudaStream_t s);
void run_decode_64(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s);
int decode_blocks_per_sm_64(Dtype dt);
void run_decode_128(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s);
int decode_blocks_per_sm_128(Dtype dt, const SdpaParams& p);
void run_decode_256(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s);
int decode_blocks_per_sm_256(Dtype dt);
void run_decode_512(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s);
int decode_blocks_per_sm_512(Dtype dt);

}  // namespace tern::cuda
