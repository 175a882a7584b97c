// Storage: a reference-counted block of device memory (owned, or borrowed from an owner such as an
// mmap'd file), and the per-device runtime hooks a backend registers to allocate and copy.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "tern/core/device.h"

namespace tern {

class Tensor;

// What a backend provides for a non-CPU device kind (backend/cuda registers the CUDA one).
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual void* allocate(size_t bytes, Device d) = 0;
  virtual void deallocate(void* p, size_t bytes, Device d) = 0;
  // Copies bytes between any two devices the runtime can reach (one of them is its own).
  virtual void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) = 0;
  virtual void memset_zero(void* p, size_t bytes, Device d) = 0;
  // dst = src element-wise; same shape and dtype, dst contiguous, src strided, both on this device.
  virtual void strided_copy(const Tensor& src, Tensor& dst) = 0;
};

void register_device_runtime(DeviceKind kind, DeviceRuntime* rt);
// The runtime for kind; throws "[device] cuda is not available in this build" when none registered.
DeviceRuntime& device_runtime(DeviceKind kind);

class Storage {
 public:
  // Allocates bytes on dev (64-byte aligned on CPU). Contents are uninitialised.
  static std::shared_ptr<Storage> allocate(size_t bytes, Device dev);
  // Wraps memory someone else owns; keep_alive is held until the storage dies (e.g. an mmap).
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, Device dev, std::shared_ptr<void> keep_alive);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = false;
  std::shared_ptr<void> keep_alive_;
};

}  // namespace tern
