// Launchers of the reductions: softmax, sum/mean/max, argmax, top-k.
#include <algorithm>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/draw.cuh"
#include "tern/backend/cuda/kernels/reduce.cuh"
#include "tern/backend/cuda/kernels/top_p.cuh"
#include "tern/backend/cuda/kernels/topk.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {
int row_threads(int64_t n) { return n >= 4096 ? 1024 : n >= 512 ? 256 : 64; }

// Chunks per line for the two-stage row kernels (few long contiguous lines: vocabulary rows); 1 means
// one block per line.
int row_chunks(int64_t lines, int64_t n) {
  if (lines >= 64 || n < 16384) return 1;
  int64_t c = n / 4096;
  return static_cast<int>(c < 128 ? c : 128);
}
}  // namespace

size_t row_workspace_bytes(int64_t lines, int64_t n) {
  const int c = row_chunks(lines, n);
  return c > 1 ? static_cast<size_t>(lines * c) * 2 * sizeof(float) : 0;
}

void launch_softmax(Dtype dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool log,
                    void* workspace, cudaStream_t s) {
  const int chunks = inner == 1 ? row_chunks(outer, n) : 1;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 1) {
      auto* part = static_cast<float2*>(workspace);
      const dim3 grid(static_cast<unsigned>(outer), chunks);
      launch_kernel(kernels::softmax_partial_kernel<T>, grid, 256, 0, s, static_cast<const T*>(x), n, chunks, part);
      launch_kernel(kernels::softmax_chunks_kernel<T>, grid, 256, 0, s, static_cast<const T*>(x), static_cast<T*>(out),
                    n, chunks, static_cast<const float2*>(part), log);
      return;
    }
    if (inner == 1) {
      launch_kernel(kernels::softmax_rows_kernel<T>, static_cast<unsigned>(outer), row_threads(n), 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), n, log);
    } else {
      launch_kernel(kernels::softmax_cols_kernel<T>, grid_for(outer * inner, 128, INT32_MAX), 128, 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), outer, n, inner, log);
    }
  });
}

void launch_reduce(Dtype dt, int op, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                   void* workspace, cudaStream_t s) {
  const int chunks = inner == 1 ? row_chunks(outer, n) : 1;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 1) {
      auto* part = static_cast<float*>(workspace);
      launch_kernel(kernels::reduce_partial_kernel<T>, dim3(static_cast<unsigned>(outer), chunks), 256, 0, s,
                    static_cast<const T*>(x), n, chunks, op, part);
      launch_kernel(kernels::reduce_final_kernel<T>, static_cast<unsigned>(outer), 32, 0, s,
                    static_cast<const float*>(part), chunks, n, op, static_cast<T*>(out));
      return;
    }
    if (inner == 1) {
      launch_kernel(kernels::reduce_rows_kernel<T>, static_cast<unsigned>(outer), row_threads(n), 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), n, op);
    } else {
      launch_kernel(kernels::reduce_cols_kernel<T>, grid_for(outer * inner, 128, INT32_MAX), 128, 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), outer, n, inner, op);
    }
  });
}


size_t argmax_workspace_bytes(int64_t lines, int64_t n) {
  const int c = row_chunks(lines, n);
  return c > 1 ? static_cast<size_t>(lines * c) * (sizeof(float) + sizeof(int64_t)) : 0;
}

void launch_argmax(Dtype dt, const void* x, int32_t* out, int64_t outer, int64_t n, int64_t inner, void* workspace,
                   cudaStream_t s) {
  const int chunks = inner == 1 ? row_chunks(outer, n) : 1;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 1) {
      auto* best_i = static_cast<int64_t*>(workspace);
      auto* best_v = reinterpret_cast<float*>(best_i + outer * chunks);
      launch_kernel(kernels::argmax_partial_kernel<T>, dim3(static_cast<unsigned>(outer), chunks), 256, 0, s,
                    static_cast<const T*>(x), n, chunks, best_v, best_i);
      launch_kernel(kernels::argmax_final_kernel, static_cast<unsigned>(outer), 32, 0, s, best_v, best_i, chunks, out);
      return;
    }
    launch_kernel(kernels::argmax_kernel<T>, static_cast<unsigned>(outer * inner), row_threads(n), 0, s,
                  static_cast<const T*>(x), out, n, inner);
  });
}

void launch_token_logprobs(Dtype dt, const void* x, int64_t rows, int64_t n, const int32_t* targets, float* out,
                           cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(kernels::token_logprob_kernel<T>, static_cast<unsigned>(rows), row_threads(n), 0, s,
                  static_cast<const T*>(x), n, targets, out);
  });
}

size_t greedy_workspace_bytes(int64_t lines, int64_t n) {
  const int c = row_chunks(lines, n);
  return c > 1 ? static_cast<size_t>(lines * c) * sizeof(kernels::GreedyPart) : 0;
}

void launch_greedy_choice(const float* x, int64_t lines, int64_t n, void* workspace, int32_t* ids, float* logprobs,
                          cudaStream_t s) {
  const int chunks = row_chunks(lines, n);
  auto* part = static_cast<kernels::GreedyPart*>(workspace);
  launch_kernel(kernels::greedy_partial_kernel, dim3(static_cast<unsigned>(lines), chunks), chunks > 1 ? 256 : row_threads(n),
                0, s, x, n, part, ids, logprobs);
  if (chunks > 1)
    launch_kernel(kernels::greedy_final_kernel, static_cast<unsigned>(lines), 32, 0, s,
                  static_cast<const kernels::GreedyPart*>(part), chunks, ids, logprobs);
}

namespace {
// Slice length of the two-stage top-k (kernels/topk.cuh); 0 where one block per line scans k times
// (strided or short lines, large k).
int topk_slice(int64_t n, int64_t inner, int64_t k) {
  if (inner != 1 || k < 1 || k > kernels::kTopkMaxK || n < 4096 || n > INT32_MAX) return 0;
  return static_cast<int>(std::min<int64_t>(kernels::kTopkSlice, std::max<int64_t>(2048, 8 * k)));
}
}  // namespace

size_t topk_workspace_bytes(int64_t outer, int64_t n, int64_t inner, int64_t k) {
  const int per = topk_slice(n, inner, k);
  return per ? static_cast<size_t>(outer * ((n + per - 1) / per) * k) * sizeof(uint64_t) : 0;
}

void launch_topk(Dtype dt, const void* x, void* values, int32_t* indices, int64_t outer, int64_t n, int64_t inner,
                 int64_t k, void* workspace, cudaStream_t s) {
  const int per = topk_slice(n, inner, k);
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (per) {
      const auto slices = static_cast<unsigned>((n + per - 1) / per);
      auto* cand = static_cast<uint64_t*>(workspace);
      const int kk = static_cast<int>(k);
      launch_kernel(kernels::topk_slices_kernel<T>, dim3(slices, static_cast<unsigned>(outer)), kernels::kTopkThreads,
                    0, s, static_cast<const T*>(x), n, per, kk, cand);
      launch_kernel(kernels::topk_merge_kernel<T>, static_cast<unsigned>(outer), kernels::kTopkThreads, 0, s,
                    static_cast<const T*>(x), n, static_cast<const uint64_t*>(cand), static_cast<int>(slices) * kk, kk,
                    static_cast<T*>(values), indices);
      return;
    }
    launch_kernel(kernels::topk_kernel<T>, static_cast<unsigned>(outer * inner), row_threads(n), 0, s,
                  static_cast<const T*>(x), static_cast<T*>(values), indices, n, inner, k);
  });
}

size_t draw_workspace_bytes(int64_t n) {
  return static_cast<size_t>((n + kernels::kDrawChunk - 1) / kernels::kDrawChunk) * sizeof(uint64_t);
}

void launch_draw_index(const float* logits, int64_t n, const float* max_logit, float u, const float* u_dev,
                       void* workspace, int32_t* out, cudaStream_t s) {
  const auto chunks = static_cast<int>((n + kernels::kDrawChunk - 1) / kernels::kDrawChunk);
  auto* sums = static_cast<uint64_t*>(workspace);
  launch_kernel(kernels::draw_sums_kernel, static_cast<unsigned>(chunks), 256, 0, s, logits, n, max_logit, sums);
  launch_kernel(kernels::draw_pick_kernel, 1u, kernels::kDrawPickThreads, 0, s, logits, n, max_logit, u, u_dev,
                static_cast<const uint64_t*>(sums), chunks, out);
}

size_t top_p_workspace_bytes(int64_t n) {
  const int64_t blocks = (n + kernels::kTopPChunk - 1) / kernels::kTopPChunk;
  return static_cast<size_t>(blocks * 2 * kernels::kTopPBins) * sizeof(uint64_t) + sizeof(kernels::TopPCut);
}

void launch_top_p_mask(const float* logits, int64_t n, const float* max_logit, uint64_t fraction, bool use_p,
                       float min_gap, void* workspace, float* out, cudaStream_t s) {
  const auto blocks = static_cast<int>((n + kernels::kTopPChunk - 1) / kernels::kTopPChunk);
  auto* hists = static_cast<uint64_t*>(workspace);
  auto* cut = reinterpret_cast<kernels::TopPCut*>(hists + int64_t(blocks) * 2 * kernels::kTopPBins);
  if (use_p) {
    constexpr size_t smem = kernels::kTopPCandidates * sizeof(uint32_t);
    static const bool sized = [] {
      TERN_CUDA_CHECK(cudaFuncSetAttribute(kernels::top_p_cut_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
      return true;
    }();
    (void)sized;
    launch_kernel(kernels::top_p_hist_kernel, static_cast<unsigned>(blocks), 256, 0, s, logits, n, max_logit, hists);
    launch_kernel(kernels::top_p_cut_kernel, 1u, kernels::kTopPThreads, smem, s, logits, n, max_logit,
                  static_cast<const uint64_t*>(hists), blocks, fraction, cut);
  }
  launch_kernel(kernels::top_p_apply_kernel, static_cast<unsigned>(blocks), 256, 0, s, logits, n, max_logit,
                static_cast<const kernels::TopPCut*>(cut), use_p, min_gap, out);
}

}  // namespace tern::cuda
