// RMSNorm: validation and output allocation; the math lives in the backends.
#include "tern/ops/norm.h"

#include "tern/ops/elementwise.h"

namespace tern::ops {

void check_rms_norm_args(const Tensor& x, const Tensor& weight, float eps) {
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
}

namespace {

// The checks of rms_norm; returns its (empty) output.
Tensor rms_norm_checked_empty(const Tensor& x, const Tensor& weight, float eps) {
  check_rms_norm_args(x, weight, eps);
  return Tensor::empty(x.shape(), x.dtype(), x.device());
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  Tensor out = rms_norm_checked_empty(x, weight, eps);
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::rms_norm(x, weight, eps, out);
  } else {
    cuda::rms_norm(x, weight, eps, out);
  }
  return out;
}

AddNorm add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps) {
  TERN_CHECK(x.defined() && delta.defined(), "[add_rms_norm] expected defined inputs, got an undefined one");
  TERN_CHECK(x.shape() == delta.shape() && x.dtype() == delta.dtype() && x.device() == delta.device(),
             "[add_rms_norm] expected x and delta of one shape, dtype and device, got {} {} and {} {}",
             shape_str(x.shape()), dtype_name(x.dtype()), shape_str(delta.shape()), dtype_name(delta.dtype()));
  if (x.device().is_cpu() || x.rank() < 1 || x.numel() == 0) {
    Tensor sum = ops::add(x, delta);
    return {sum, rms_norm(sum, weight, eps)};
  }
  Tensor normed = rms_norm_checked_empty(x, weight, eps);
  Tensor sum = Tensor::empty(x.shape(), x.dtype(), x.device());
  cuda::add_rms_norm(x, delta, weight, eps, sum, normed);
  return {sum, normed};
}

}  // namespace tern::ops
