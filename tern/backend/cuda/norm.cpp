// CUDA RMSNorm entry point.
#include "tern/ops/norm.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

namespace {

// The rows of x (all dims but the last) as a kernel Layout of element offsets; x's last dim must be
// contiguous, else x is copied.
Tensor rows_view(const Tensor& x, Layout& rows) {
  Tensor xc = x.stride(-1) == 1 || x.size(-1) == 1 ? x : x.contiguous();
  Shape lead(xc.shape().begin(), xc.shape().end() - 1);
  Strides st(xc.strides().begin(), xc.strides().end() - 1);
  if (lead.empty()) {
    lead = {1};
    st = {0};
  }
  rows = coalesce<1>(lead, {&st})[0];
  return xc;
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  check_cuda(x, "rms_norm");
  const int64_t d = x.size(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  if (rows == 0) return;
  Layout rl;
  Tensor xc = rows_view(x, rl);
  Tensor wc;
  if (weight.defined()) {
    check_cuda(weight, "rms_norm");
    wc = weight.contiguous();
  }
  launch_rms_norm(xc.dtype(), xc.data_ptr(), rl, nullptr, nullptr, wc.defined() ? wc.dtype() : xc.dtype(),
                  wc.defined() ? wc.data_ptr() : nullptr, out.data_ptr(), rows, d, eps, stream());
}

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps, Tensor& sum, Tensor& out) {
  check_cuda(x, "add_rms_norm");
  const int64_t d = x.size(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  if (rows == 0) return;
  Layout rl;
  Tensor xc = rows_view(x, rl), dc = delta.contiguous();
  Tensor wc;
  if (weight.defined()) {
    check_cuda(weight, "add_rms_norm");
    wc = weight.contiguous();
  }
  launch_rms_norm(xc.dtype(), xc.data_ptr(), rl, dc.data_ptr(), sum.data_ptr(), wc.defined() ? wc.dtype() : xc.dtype(),
                  wc.defined() ? wc.data_ptr() : nullptr, out.data_ptr(), rows, d, eps, stream());
}

}  // namespace tern::cuda
