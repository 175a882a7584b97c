// Launcher of the tensor-core decode products (5 to 32 rows of bf16 activations, bf16 weights): plain
// and gated, with the K split over a cluster of blocks where the rows alone would not fill the GPU.
#include <cstdlib>

#include "tern/backend/cuda/kernels/gemv_mma.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {
namespace {

// Where it pays in a whole compiled decode step on the H200 (bench/RESULTS.md, 2026-12-03): 5 to 8 rows of
// weights of at most 2^23 elements (Qwen3-0.6B's): batch-8 decode 5,868 tok/s against 5,142 with cuBLASLt.
// Alone (tern_cuda_bench --skinny) it also beats cuBLASLt at 8 rows of Qwen3-8B's weights and at 32 rows of
// 0.6B's, but not inside the step: 8B batch 8 ran 1,306 tok/s with it against 1,473 without, 0.6B batch 32
// 16,588 against 16,866. Fewer than 5 rows take gemv.cu.
constexpr int64_t kMmaGemvMinRows = 5, kMmaGemvDefaultRows = 8, kMmaGemvMaxRows = 32;
constexpr int64_t kMmaGemvSmallWeights = int64_t{1} << 23;

// Blocks of a cluster splitting K: the fewest (1, 2, 4, 8) whose grid comes within a sixteenth of one
// block per SM (measured best at every shape above; a second resident block per SM does not pay for
// the doubled partial sums), while each split keeps a full group of loads in flight per lane.
// TERN_CUDA_MMA_SPLITS=1|2|4|8 forces a count (for benchmarks and tests).
int mma_splits(int64_t row_blocks, int64_t K) {
  const char* e = std::getenv("TERN_CUDA_MMA_SPLITS");
  const int forced = e ? std::atoi(e) : 0;
  const int64_t chunks = K / 32;
  if (forced >= 1 && forced <= kernels::kClusterMaxBlocks && (forced & (forced - 1)) == 0)
    return chunks >= forced ? forced : 1;
  const int64_t sms = device_props().multiProcessorCount, want = sms - sms / 16;
  int S = 1;
  while (S < kernels::kClusterMaxBlocks && row_blocks * S < want && chunks / (2 * S) >= kernels::kMmaGemvDepth) S *= 2;
  return S;
}

template <int MT, int ACT, typename O>
void run(const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, cudaStream_t s) {
  constexpr int64_t per_block = ACT >= 0 ? kernels::kMmaGemvRows / 2 : kernels::kMmaGemvRows;
  const int64_t row_blocks = (N + per_block - 1) / per_block;
  const int S = mma_splits(row_blocks, K);
  launch_kernel_clusters(kernels::gemv_mma_kernel<MT, ACT, O>, dim3(S, static_cast<unsigned>(row_blocks)),
                         kernels::kMmaGemvWarps * 32, 0, s, static_cast<unsigned>(S),
                         static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                         static_cast<O*>(out), static_cast<int>(M), N, K);
}

// Token tiles of 8, rounded up to 1, 2 or 4 (the weights dominate the bytes; fewer instances).
template <int ACT, typename O>
void run_tiles(const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, cudaStream_t s) {
  if (M <= 8) {
    run<1, ACT, O>(x, w, out, M, N, K, s);
  } else if (M <= 16) {
    run<2, ACT, O>(x, w, out, M, N, K, s);
  } else {
    run<4, ACT, O>(x, w, out, M, N, K, s);
  }
}

// rows: w's rows (2N when gated). TERN_CUDA_MMA_GEMV=0 turns the kernel off (cuBLASLt takes these
// products), =1 takes it for every row count up to 32 whatever the weights' size (for comparison).
bool mma_eligible(int64_t M, const void* x, const void* w, const void* out, int64_t rows, int64_t K) {
  if (M < kMmaGemvMinRows || M > kMmaGemvMaxRows) return false;  // most products: no environment lookup
  const char* e = std::getenv("TERN_CUDA_MMA_GEMV");
  if (e && e[0] == '0') return false;
  const bool any = e && e[0] == '1';
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool size_ok = any || (M <= kMmaGemvDefaultRows && rows * K <= kMmaGemvSmallWeights);
  return size_ok && K >= 32 && K % 32 == 0 && aligned(x) && aligned(w) && aligned(out) && device_props().major >= 9;
}

}  // namespace

bool launch_gemv_mma(int64_t M, const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K,
                     cudaStream_t s) {
  if (!mma_eligible(M, x, w, out, N, K)) return false;
  if (out_dt == Dtype::f32) {
    run_tiles<-1, float>(x, w, out, M, N, K, s);
  } else if (out_dt == Dtype::bf16) {
    run_tiles<-1, __nv_bfloat16>(x, w, out, M, N, K, s);
  } else {
    return false;
  }
  return true;
}

bool launch_gemv_mma_gated(int64_t M, int act, const void* x, const void* w, void* out, int64_t N, int64_t K,
                           cudaStream_t s) {
  if (!mma_eligible(M, x, w, out, 2 * N, K)) return false;
  switch (act) {
    case kernels::kSilu:
      run_tiles<kernels::kSilu, __nv_bfloat16>(x, w, out, M, N, K, s);
      return true;
    case kernels::kGeluTanh:
      run_tiles<kernels::kGeluTanh, __nv_bfloat16>(x, w, out, M, N, K, s);
      return true;
    case kernels::kGeluErf:
      run_tiles<kernels::kGeluErf, __nv_bfloat16>(x, w, out, M, N, K, s);
      return true;
    default:
      return false;
  }
}

}  // namespace tern::cuda
