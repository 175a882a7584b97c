// Tensor: a view (storage, offset, shape, strides, dtype). Views share storage; contiguous() copies
// only when needed. Element offsets and strides are in elements, PyTorch order.
#pragma once
#include <memory>
#include <vector>

#include "tern/base/error.h"
#include "tern/core/device.h"
#include "tern/core/dtype.h"
#include "tern/core/shape.h"
#include "tern/core/storage.h"

namespace tern {

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // New uninitialised tensor, contiguous.
  static Tensor empty(const Shape& shape, Dtype dtype, Device dev = Device::cpu());
  static Tensor zeros(const Shape& shape, Dtype dtype, Device dev = Device::cpu());
  // Every element set to value (converted to dtype). CPU only.
  static Tensor full(const Shape& shape, double value, Dtype dtype);
  // Copies host values into a new CPU tensor; throws if numel(shape) != values.size().
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // A view over existing storage; throws if the view reaches outside it.
  static Tensor from_storage(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape,
                             const Strides& strides, Dtype dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  size_t rank() const { return shape_.size(); }
  // Size of dim (negative counts from the end).
  int64_t size(int64_t dim) const { return shape_[normalize_dim(dim, rank(), "tensor")]; }
  int64_t stride(int64_t dim) const { return strides_[normalize_dim(dim, rank(), "tensor")]; }
  int64_t numel() const { return tern::numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  Dtype dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool is_contiguous() const;

  // Address of element 0 of the view.
  void* data_ptr() const;
  // Typed address of element 0; throws if T does not match dtype.
  template <typename T>
  T* data() const {
    TERN_CHECK(DtypeOf<T>::value == dtype_, "[tensor] expected dtype {}, got {}", dtype_name(DtypeOf<T>::value),
               dtype_name(dtype_));
    return static_cast<T*>(data_ptr());
  }
  // The single element of a one-element CPU tensor, converted to T.
  template <typename T>
  T item() const;

  // Views (no copy). Negative dims count from the end.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return slice(dim, start, start + length); }
  Tensor select(int64_t dim, int64_t index) const;  // removes dim
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor broadcast_to(const Shape& shape) const;  // stride 0 on broadcast dims
  // Same elements, new shape (one dim may be -1); a view when the strides allow, else throws.
  Tensor view(const Shape& shape) const;
  // Like view, but copies when the layout does not allow a view.
  Tensor reshape(const Shape& shape) const;

  // Copies
  Tensor contiguous() const;  // *this when already contiguous
  Tensor clone() const;       // always a new contiguous tensor
  Tensor to(Device dev) const;
  // Element-wise copy from src (same shape and dtype) into this (possibly strided) view.
  void copy_from(const Tensor& src);
  // CPU: every element widened to float (any dtype); for tests and host-side logic.
  std::vector<float> to_f32_vector() const;

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Strides strides_;
  Dtype dtype_ = Dtype::f32;
};

// CPU element-wise strided copy (same shape and dtype); the CPU half of Tensor::copy_from.
void cpu_strided_copy(const Tensor& src, Tensor& dst);

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  TERN_CHECK(static_cast<int64_t>(values.size()) == tern::numel(shape),
             "[tensor] expected {} values for shape {}, got {}", tern::numel(shape), shape_str(shape), values.size());
  Tensor t = empty(shape, DtypeOf<T>::value);
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

template <typename T>
T Tensor::item() const {
  TERN_CHECK(numel() == 1, "[tensor] expected one element for item(), got shape {}", shape_str(shape_));
  TERN_CHECK(device().is_cpu(), "[tensor] expected a cpu tensor for item(), got {}", device().str());
  return dispatch_dtype(dtype_, [&](auto tag) -> T {
    using S = decltype(tag);
    return static_cast<T>(static_cast<double>(static_cast<float>(*static_cast<const S*>(data_ptr()))));
  });
}

}  // namespace tern
