// Launcher of the fused q/k norm and rotary embedding.
#include <cstdint>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/norm_rope.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"

namespace tern::cuda {

namespace {

// Whether the rows run in norm_rope_128_kernel's layout: bf16 heads of 128 whose rows (q, k and their
// destinations) are 8-byte aligned, 4 dims per lane.
bool norm_rope_by4(Dtype dt, const kernels::NormRopeArgs& a) {
  auto aligned = [](const void* p, const int64_t* st) {
    return reinterpret_cast<uintptr_t>(p) % 8 == 0 && (!st || (st[0] % 4 == 0 && st[1] % 4 == 0 && st[2] % 4 == 0));
  };
  return dt == Dtype::bf16 && a.D == 128 && a.rot % 8 == 0 && aligned(a.x[0], a.st[0]) && aligned(a.x[1], a.st[1]) &&
         aligned(a.out[0], nullptr) && (a.kv[0] ? aligned(a.kv[0], a.kv_st[0]) : aligned(a.out[1], nullptr));
}

}  // namespace

void launch_norm_rope(Dtype dt, Dtype wt, Dtype pos_dt, const kernels::NormRopeArgs& a, cudaStream_t s) {
  const int64_t rows = a.heads[0] + a.heads[1] + (a.kv[1] ? a.heads[1] : 0);  // per token
  const dim3 grid(static_cast<unsigned>(a.B * a.L),
                  static_cast<unsigned>((rows + kernels::kNormRopeWarps - 1) / kernels::kNormRopeWarps));
  if (norm_rope_by4(dt, a)) {
    dispatch_float(wt, [&](auto wtag) {
      using W = decltype(wtag);
      dispatch_index(pos_dt, [&](auto ptag) {
        using P = decltype(ptag);
        launch_kernel(kernels::norm_rope_128_kernel<W, P>, grid, kernels::kNormRopeWarps * 32, 0, s, a);
      });
    });
    return;
  }
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
