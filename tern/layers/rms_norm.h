// RMSNorm layer over the last dim.
#pragma once
#include "tern/core/tensor.h"
#include "tern/layers/weight_loader.h"
#include "tern/ops/norm.h"

namespace tern {

struct RMSNorm {
  Tensor weight;  // [dim]; undefined for the scale-free norm
  float eps = 1e-6f;

  static RMSNorm load(const WeightLoader& w, const std::string& name, int64_t dim, float eps) {
    return RMSNorm{w.get(name + ".weight", {dim}), eps};
  }
  Tensor forward(const Tensor& x) const { return ops::rms_norm(x, weight, eps); }
};

}  // namespace tern
