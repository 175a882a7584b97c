// Normalisation: RMSNorm over the last dim, f32 math.
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

// y = x / sqrt(mean(x^2, -1) + eps) * weight; weight [D] or undefined for the scale-free norm.
// [.., D] -> [.., D] in x's dtype.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
// The argument checks of rms_norm (its "[rms_norm] expected ..." errors), for ops that fuse it.
void check_rms_norm_args(const Tensor& x, const Tensor& weight, float eps);

// The residual step of pre-norm blocks in one pass: sum = x + delta (rounded to x's dtype), normed =
// rms_norm(sum, weight, eps) -- the same numbers as ops::add then ops::rms_norm. x and delta share shape,
// dtype and device.
struct AddNorm {
  Tensor sum, normed;
};
AddNorm add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps);

}  // namespace tern::ops

namespace tern::cpu {
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
}
namespace tern::cuda {
// Rows of x may be strided (last dim contiguous); out is contiguous.
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps, Tensor& sum, Tensor& out);
}  // namespace tern::cuda
