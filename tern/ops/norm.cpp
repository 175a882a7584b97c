// RMSNorm: validation and output allocation; the math lives in the backends.
#include "tern/ops/norm.h"

namespace tern::ops {

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  TERN_CHECK(x.defined(), "[rms_norm] expected a defined input, got an undefined one");
  TERN_CHECK(is_floating(x.dtype()), "[rms_norm] expected a float dtype (f32, bf16, f16), got {}",
             dtype_name(x.dtype()));
  TERN_CHECK(x.rank() >= 1, "[rms_norm] expected rank >= 1, got shape {}", shape_str(x.shape()));
  TERN_CHECK(eps >= 0.0f, "[rms_norm] expected eps >= 0, got {}", eps);
  const int64_t d = x.size(-1);
  if (weight.defined()) {
    TERN_CHECK(weight.shape() == Shape{d}, "[rms_norm] expected weight of shape [{}], got {}", d,
               shape_str(weight.shape()));
    TERN_CHECK(is_floating(weight.dtype()), "[rms_norm] expected a float weight dtype, got {}",
               dtype_name(weight.dtype()));
    TERN_CHECK(weight.device() == x.device(), "[rms_norm] expected weight on {}, got {}", x.device().str(),
               weight.device().str());
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::rms_norm(x, weight, eps, out);
  } else {
    cuda::rms_norm(x, weight, eps, out);
  }
  return out;
}

}  // namespace tern::ops
