// Launcher of the fused q/k norm and rotary embedding.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/norm_rope.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"

namespace tern::cuda {

void launch_norm_rope(Dtype dt, Dtype wt, Dtype pos_dt, const kernels::NormRopeArgs& a, cudaStream_t s) {
  const int64_t rows = a.heads[0] + a.heads[1] + (a.kv[1] ? a.heads[1] : 0);  // per token
  const dim3 grid(static_cast<unsigned>(a.B * a.L),
                  static_cast<unsigned>((rows + kernels::kNormRopeWarps - 1) / kernels::kNormRopeWarps));
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_float(wt, [&](auto wtag) {
      using W = decltype(wtag);
      dispatch_index(pos_dt, [&](auto ptag) {
        using P = decltype(ptag);
        launch_kernel(kernels::norm_rope_kernel<T, W, P>, grid, kernels::kNormRopeWarps * 32, 0, s, a);
      });
    });
  });
}

}  // namespace tern::cuda
