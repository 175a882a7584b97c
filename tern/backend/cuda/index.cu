// Launcher of the embedding gather.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/index.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_embedding(Dtype table_dt, const void* table, int64_t V, int64_t D, Dtype id_dt, const void* ids,
                      int64_t n_ids, Dtype out_dt, void* out, int32_t* bad, cudaStream_t s) {
  const int threads = D >= 1024 ? 256 : 128;
  dispatch_float(table_dt, [&](auto ttag) {
    using T = decltype(ttag);
    dispatch_index(id_dt, [&](auto itag) {
      using I = decltype(itag);
      dispatch_float(out_dt, [&](auto otag) {
        using O = decltype(otag);
        kernels::embedding_kernel<T, I, O><<<static_cast<unsigned>(n_ids), threads, 0, s>>>(
            static_cast<const T*>(table), V, D, static_cast<const I*>(ids), static_cast<O*>(out), bad);
      });
    });
  });
  TERN_CUDA_CHECK_LAUNCH();
}

}  // namespace tern::cuda
