// Launcher of the RMSNorm kernel.
#include <algorithm>
#include <cstdint>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/norm.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_rms_norm(Dtype xt, const void* x, const Layout& rows_layout, const void* delta, void* sum, Dtype wt,
                     const void* w, void* out, int64_t rows, int64_t d, float eps, cudaStream_t s) {
  // rows of up to 8,192: the register-resident kernel, 8 elements per thread
  const int64_t regs_threads = (d + kernels::kNormValuesPerThread - 1) / kernels::kNormValuesPerThread;
  const bool regs = regs_threads <= 1024;
  const int threads = regs ? static_cast<int>(std::max<int64_t>(32, (regs_threads + 31) / 32 * 32))
                           : (d >= 2048  ? 512
                              : d >= 512 ? 256
                                         : 128);
  // 2-byte rows of whole, aligned 16-byte vectors: the vector kernel (8 elements per thread as well)
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  bool vec = regs && dtype_size(xt) == 2 && d % 8 == 0 && aligned(x) && aligned(delta) && aligned(sum) &&
             aligned(out) && (rows_layout.rank == 0 || rows_layout.stride[rows_layout.rank - 1] % 8 == 0);
  for (int i = 0; vec && i + 1 < rows_layout.rank; ++i) vec = rows_layout.stride[i] % 8 == 0;
  dispatch_float(xt, [&](auto xtag) {
    using T = decltype(xtag);
    dispatch_float(wt, [&](auto wtag) {
      using W = decltype(wtag);
      if constexpr (sizeof(T) == 2) {
        if (vec) {
          launch_kernel(kernels::rms_norm_vec_kernel<T, W>, static_cast<unsigned>(rows), threads, 0, s,
                        static_cast<const T*>(x), rows_layout, static_cast<const T*>(delta), static_cast<T*>(sum),
                        static_cast<const W*>(w), static_cast<T*>(out), d, eps);
          return;
        }
      }
      launch_kernel(regs ? kernels::rms_norm_regs_kernel<T, W> : kernels::rms_norm_kernel<T, W>,
                    static_cast<unsigned>(rows), threads, 0, s, static_cast<const T*>(x), rows_layout,
                    static_cast<const T*>(delta), static_cast<T*>(sum), static_cast<const W*>(w), static_cast<T*>(out),
                    d, eps);
    });
  });
}

}  // namespace tern::cuda
