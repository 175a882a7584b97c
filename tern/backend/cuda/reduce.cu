// Launchers of the reductions: softmax, sum/mean/max, argmax, top-k.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/reduce.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {
int row_threads(int64_t n) { return n >= 4096 ? 1024 : n >= 512 ? 256 : 64; }
}  // namespace

void launch_softmax(Dtype dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
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
                   cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1) {
      launch_kernel(kernels::reduce_rows_kernel<T>, static_cast<unsigned>(outer), row_threads(n), 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), n, op);
    } else {
      launch_kernel(kernels::reduce_cols_kernel<T>, grid_for(outer * inner, 128, INT32_MAX), 128, 0, s,
                    static_cast<const T*>(x), static_cast<T*>(out), outer, n, inner, op);
    }
  });
}

namespace {
// Chunks per line for the two-stage argmax; 1 means one block per line.
int argmax_chunks(int64_t lines, int64_t n) {
  if (lines >= 64 || n < 16384) return 1;
  int64_t c = n / 4096;
  return static_cast<int>(c < 128 ? c : 128);
}
}  // namespace

size_t argmax_workspace_bytes(int64_t lines, int64_t n) {
  const int c = argmax_chunks(lines, n);
  return c > 1 ? static_cast<size_t>(lines * c) * (sizeof(float) + sizeof(int64_t)) : 0;
}

void launch_argmax(Dtype dt, const void* x, int32_t* out, int64_t outer, int64_t n, int64_t inner, void* workspace,
                   cudaStream_t s) {
  const int chunks = inner == 1 ? argmax_chunks(outer, n) : 1;
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

void launch_topk(Dtype dt, const void* x, void* values, int32_t* indices, int64_t outer, int64_t n, int64_t inner,
                 int64_t k, cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(kernels::topk_kernel<T>, static_cast<unsigned>(outer * inner), row_threads(n), 0, s,
                  static_cast<const T*>(x), static_cast<T*>(values), indices, n, inner, k);
  });
}

}  // namespace tern::cuda
