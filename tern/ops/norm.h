// Normalisation: RMSNorm over the last dim, f32 math.
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

// y = x / sqrt(mean(x^2, -1) + eps) * weight; weight [D] or undefined for the scale-free norm.
// [.., D] -> [.., D] in x's dtype.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);

}  // namespace tern::ops

namespace tern::cpu {
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
}
namespace tern::cuda {
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
}
