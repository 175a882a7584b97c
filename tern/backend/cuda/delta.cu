// Launchers of the gated DeltaNet kernels.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/delta.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_l2norm(Dtype dt, const void* x, void* out, int64_t rows, int64_t d, float eps, cudaStream_t s) {
  const int threads = d >= 2048 ? 512 : d >= 512 ? 256 : 128;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(kernels::l2norm_kernel<T>, static_cast<unsigned>(rows), threads, 0, s, static_cast<const T*>(x),
                  static_cast<T*>(out), d, eps);
  });
}

void launch_causal_conv1d(const float* x, const float* w, float* history, float* out, int64_t B, int64_t L,
                          int64_t C, int64_t K, cudaStream_t s) {
  constexpr int threads = 256;
  launch_kernel(kernels::causal_conv1d_kernel, grid_for(B * L * C, threads), threads, 0, s, x, w, history, out, B, L, C,
                K);
  if (K > 1) {
    launch_kernel(kernels::conv_history_kernel, grid_for(B * C, threads), threads, 0, s, x, history, B, L, C, K);
  }
}

void launch_delta_recurrent(const float* q, const float* k, const float* v, const float* g, const float* beta,
                            float* state, float* out, int64_t B, int64_t L, int64_t Hk, int64_t Dk, int64_t Hv,
                            int64_t Dv, cudaStream_t s) {
  constexpr int cols = kernels::kDeltaCols;
  const dim3 grid(static_cast<unsigned>((Dv + cols - 1) / cols), static_cast<unsigned>(Hv), static_cast<unsigned>(B));
  const size_t smem = static_cast<size_t>(Dk * cols + 2 * Dk) * sizeof(float);
  launch_kernel(kernels::delta_recurrent_kernel, grid, cols, smem, s, q, k, v, g, beta, state, out, L, Hk, Dk, Hv, Dv);
}

int64_t delta_chunked_scratch(int64_t B, int64_t L, int64_t Hv, int64_t chunk) {
  const int64_t nchunks = (L + chunk - 1) / chunk;
  return 2 * B * Hv * nchunks * kernels::kMaxChunk * kernels::kMaxChunk + 2 * B * Hv * L;
}

void launch_delta_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                          float* state, float* out, int64_t B, int64_t L, int64_t Hk, int64_t Dk, int64_t Hv,
                          int64_t Dv, int64_t chunk, float* scratch, cudaStream_t s) {
  // Opt in once to the shared memory of the largest case (Dk 256: about 195 KB and 217 KB).
  static const bool configured = [] {
    TERN_CUDA_CHECK(cudaFuncSetAttribute(kernels::delta_chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kernels::delta_prep_smem(256))));
    TERN_CUDA_CHECK(cudaFuncSetAttribute(kernels::delta_chunk_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kernels::delta_scan_smem(256))));
    return true;
  }();
  (void)configured;
  const int64_t nchunks = (L + chunk - 1) / chunk, mat = B * Hv * nchunks * kernels::kMaxChunk * kernels::kMaxChunk;
  float* T = scratch;
  float* P = T + mat;
  float* e = P + mat;
  float* tail = e + B * Hv * L;
  const dim3 prep(static_cast<unsigned>(nchunks), static_cast<unsigned>(Hk), static_cast<unsigned>(B));
  launch_kernel(kernels::delta_chunk_prep_kernel, prep, kernels::kChunkThreads, kernels::delta_prep_smem(Dk), s, q, k,
                g, beta, T, P, e, tail, L, Hk, Dk, Hv, chunk);
  constexpr int cols = kernels::kScanCols;
  const dim3 scan(static_cast<unsigned>((Dv + cols - 1) / cols), static_cast<unsigned>(Hv), static_cast<unsigned>(B));
  launch_kernel(kernels::delta_chunk_scan_kernel, scan, kernels::kChunkThreads, kernels::delta_scan_smem(Dk), s, q, k,
                v, beta, static_cast<const float*>(T), static_cast<const float*>(P), static_cast<const float*>(e),
                static_cast<const float*>(tail), state, out, L, Hk, Dk, Hv, Dv, chunk);
}

}  // namespace tern::cuda
