// Launcher of the row attention kernel (any mask, dtype, head dim <= 256) and its split-K combine.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/attention_rows.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_sdpa_rows(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, cudaStream_t s) {
  kernels::RowsArgs a{};
  copy_sdpa_common(a, p);
  a.v = p.v;
  a.out = p.out;
  a.partial = workspace;
  a.B = p.B, a.D = p.D, a.Dv = p.Dv;
  a.bias = p.bias;
  for (int i = 0; i < 4; ++i) a.bs[i] = p.bias_stride[i];
  a.n_splits = n_splits;
  const int64_t rows = p.B * p.Hq * p.Lq;
  const int64_t dmax = p.D > p.Dv ? p.D : p.Dv;
  dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n_splits));
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (dmax <= 64) {
      launch_kernel(kernels::attention_rows_kernel<T, 2>, grid, kernels::kRowsWarps * 32, 0, s, a);
    } else if (dmax <= 128) {
      launch_kernel(kernels::attention_rows_kernel<T, 4>, grid, kernels::kRowsWarps * 32, 0, s, a);
    } else {
      launch_kernel(kernels::attention_rows_kernel<T, 8>, grid, kernels::kRowsWarps * 32, 0, s, a);
    }
    if (n_splits > 1) {
      launch_kernel(kernels::attention_combine_kernel<T>, static_cast<unsigned>(rows), 128, 0, s, workspace,
                    static_cast<T*>(p.out), rows, p.Dv, n_splits, p.Dv);
    }
  });
}

}  // namespace tern::cuda
