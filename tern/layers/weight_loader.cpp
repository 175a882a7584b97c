// WeightLoader: shape check, dtype conversion, device placement.
#include "tern/layers/weight_loader.h"

#include "tern/ops/elementwise.h"

namespace tern {

Tensor WeightLoader::get(const std::string& name, const Shape& shape) const {
  Tensor t = store_.get(prefix_ + name, shape);
  if (t.dtype() != dtype_) t = ops::cast(t, dtype_);
  else t = t.contiguous();
  return t.to(device_);
}

Tensor WeightLoader::get_matrix(const std::string& name, const Shape& shape) const {
  if (device_.is_cpu() && dtype_ == Dtype::f32) {
    Tensor t = store_.get(prefix_ + name, shape);
    if (t.dtype() == Dtype::bf16) return t;
  }
  return get(name, shape);
}

}  // namespace tern
