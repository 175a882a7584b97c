// CUDA RMSNorm entry point.
#include "tern/ops/norm.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  check_cuda(x, "rms_norm");
  Tensor xc = x.contiguous();
  const int64_t d = x.size(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  if (rows == 0) return;
  Tensor wc;
  if (weight.defined()) {
    check_cuda(weight, "rms_norm");
    wc = weight.contiguous();
  }
  launch_rms_norm(xc.dtype(), xc.data_ptr(), wc.defined() ? wc.dtype() : xc.dtype(),
                  wc.defined() ? wc.data_ptr() : nullptr, out.data_ptr(), rows, d, eps, stream());
}

}  // namespace tern::cuda
