// WeightLoader: reads named checkpoint tensors, checks their shapes, and places them on the compute
// device in the compute dtype (f32 on CPU, where bf16 weights widen exactly on load).
#pragma once
#include <string>

#include "tern/core/tensor.h"
#include "tern/io/weights.h"

namespace tern {

class WeightLoader {
 public:
  WeightLoader(const io::WeightStore& store, std::string prefix, Device device, Dtype dtype)
      : store_(store), prefix_(std::move(prefix)), device_(device), dtype_(dtype) {}

  // prefix + name with the expected shape, converted to the compute dtype on the device.
  // Throws "[weights] ... missing tensor" / "expected shape" errors naming the file and tensor.
  Tensor get(const std::string& name, const Shape& shape) const;
  // A matrix operand of linear/embedding: like get, except that on the CPU a bf16 checkpoint tensor stays
  // bf16 (a zero-copy view of the file) while the compute dtype is f32 — bf16 widens exactly, so the
  // math is unchanged and decode reads half the bytes.
  Tensor get_matrix(const std::string& name, const Shape& shape) const;
  bool has(const std::string& name) const { return store_.has(prefix_ + name); }
  // A loader for names under prefix + sub (e.g. "layers.3.").
  WeightLoader sub(const std::string& sub) const { return WeightLoader(store_, prefix_ + sub, device_, dtype_); }

  Device device() const { return device_; }
  Dtype dtype() const { return dtype_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const io::WeightStore& store_;
  std::string prefix_;
  Device device_;
  Dtype dtype_;
};

}  // namespace tern
