// CPU allocation and the device-runtime registry.
#include "tern/core/storage.h"

#include <cstdlib>

#include "tern/base/error.h"

namespace tern {
namespace {
DeviceRuntime* g_cuda_runtime = nullptr;
}

void register_device_runtime(DeviceKind kind, DeviceRuntime* rt) {
  TERN_ASSERT(kind == DeviceKind::cuda, "only the cuda runtime is registrable");
  g_cuda_runtime = rt;
}

DeviceRuntime& device_runtime(DeviceKind kind) {
  TERN_CHECK(kind == DeviceKind::cuda && g_cuda_runtime, "[device] cuda is not available in this build");
  return *g_cuda_runtime;
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device dev) {
  std::shared_ptr<Storage> s(new Storage());
  s->bytes_ = bytes;
  s->device_ = dev;
  s->owned_ = true;
  if (dev.is_cpu()) {
    size_t rounded = (bytes + 63) / 64 * 64;
    s->data_ = std::aligned_alloc(64, rounded ? rounded : 64);
    TERN_CHECK(s->data_ != nullptr, "[storage] expected to allocate {} bytes on cpu, got out of memory", bytes);
  } else {
    s->data_ = device_runtime(dev.kind).allocate(bytes, dev);
  }
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, Device dev, std::shared_ptr<void> keep_alive) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = dev;
  s->keep_alive_ = std::move(keep_alive);
  return s;
}

Storage::~Storage() {
  if (!owned_ || !data_) return;
  if (device_.is_cpu()) {
    std::free(data_);
  } else if (g_cuda_runtime) {
    g_cuda_runtime->deallocate(data_, bytes_, device_);
  }
}

}  // namespace tern
