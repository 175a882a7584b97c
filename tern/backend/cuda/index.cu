// Launchers of the embedding gather and its inverse, scatter_rows.
#include <algorithm>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/index.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
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
        launch_kernel(kernels::embedding_kernel<T, I, O>, static_cast<unsigned>(n_ids), threads, 0, s,
                      static_cast<const T*>(table), V, D, static_cast<const I*>(ids), static_cast<O*>(out), bad);
      });
    });
  });
}

void launch_write_positions(size_t elem, int count, const kernels::PositionWrites& w, int64_t B,
                            const int32_t* positions, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(B * w.pair[0].H), static_cast<unsigned>(count));
  const int threads = std::max(w.pair[0].D, w.pair[count - 1].D) >= 256 ? 256 : 128;
  auto go = [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(kernels::write_positions_kernel<E>, grid, threads, 0, s, w, positions);
  };
  switch (elem) {
    case 1: go(uint8_t{}); break;
    case 2: go(uint16_t{}); break;
    case 4: go(uint32_t{}); break;
    default: go(uint64_t{}); break;
  }
}

void launch_scatter_rows(Dtype dt, void* table, int64_t V, int64_t D, Dtype id_dt, const void* ids, int64_t n_ids,
                         const void* rows, cudaStream_t s) {
  const int threads = D >= 1024 ? 256 : D >= 128 ? 128 : 32;
  dispatch_float(dt, [&](auto ttag) {
    using T = decltype(ttag);
    dispatch_index(id_dt, [&](auto itag) {
      using I = decltype(itag);
      launch_kernel(kernels::scatter_rows_kernel<T, I>, static_cast<unsigned>(n_ids), threads, 0, s,
                    static_cast<T*>(table), V, D, static_cast<const I*>(ids), static_cast<const T*>(rows));
    });
  });
}

}  // namespace tern::cuda
