// Launcher of the rotary-embedding kernel.
#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/rope.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_rope(Dtype dt, const void* x, void* out, int64_t B, int64_t H, int64_t L, int64_t D, Dtype pos_dt,
                 const void* pos, bool per_batch, const float* inv_freq, int64_t rot, float attn_scale,
                 cudaStream_t s) {
  const int64_t rows = B * H * L;
  const int threads = rot / 2 >= 128 ? 128 : 64;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(pos_dt, [&](auto ptag) {
      using P = decltype(ptag);
      launch_kernel(kernels::rope_kernel<T, P>, static_cast<unsigned>(rows), threads, 0, s, static_cast<const T*>(x),
                    static_cast<T*>(out), H, L, D, static_cast<const P*>(pos), per_batch, inv_freq, rot, attn_scale);
    });
  });
}

}  // namespace tern::cuda
