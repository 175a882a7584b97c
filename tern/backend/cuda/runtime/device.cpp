// CUDA device setup, the engine stream, the cuda DeviceRuntime (allocate, copy, memset, strided
// copy) and the public device queries of tern/ops/device.h.
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/backend/cuda/runtime/check.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/core/storage.h"
#include "tern/core/tensor.h"
#include "tern/ops/device.h"

namespace tern::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  TERN_THROW("[cuda] {} failed: {}: {} at {}:{}", expr, cudaGetErrorName(err), cudaGetErrorString(err),
             base ? base + 1 : file, line);
}

void throw_unsupported_dtype(const char* what, int dtype) {
  TERN_THROW("[cuda] {} does not support dtype {}", what, dtype_name(static_cast<Dtype>(dtype)));
}

namespace {

struct Context {
  std::mutex mu;
  bool ready = false;
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaDeviceProp props{};
  std::unordered_map<std::string, void*> constants;
  unsigned* counters = nullptr;
};

Context& context() {
  static Context* c = new Context();  // never destroyed: tensors may outlive static destructors
  return *c;
}

class CudaRuntime final : public DeviceRuntime {
 public:
  void* allocate(size_t bytes, Device) override { return device_alloc(bytes); }
  void deallocate(void* p, size_t, Device) override { device_free(p); }

  void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) override {
    if (bytes == 0) return;
    cudaMemcpyKind kind = dst_dev.is_cpu() ? (src_dev.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost)
                                           : (src_dev.is_cpu() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice);
    TERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
    // The host side must see (or may reuse) its buffer as soon as copy() returns.
    if (kind != cudaMemcpyDeviceToDevice) TERN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

  void memset_zero(void* p, size_t bytes, Device) override {
    if (bytes) TERN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
  }

  void strided_copy(const Tensor& src, Tensor& dst) override {
    if (src.numel() == 0) return;
    if (src.is_contiguous() && dst.is_contiguous()) {
      TERN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                      stream()));
      return;
    }
    auto [ls, ld] = coalesce2(src.shape(), src.strides(), dst.strides());
    launch_strided_copy(src.data_ptr(), ls, dst.data_ptr(), ld, src.numel(), dtype_size(src.dtype()), stream());
  }
};

}  // namespace

bool initialized() { return context().ready; }

cudaStream_t stream() {
  Context& c = context();
  TERN_CHECK(c.ready, "[cuda] expected tern::cuda_init() before CUDA work, got an uninitialised backend");
  return c.stream;
}

const cudaDeviceProp& device_props() {
  Context& c = context();
  TERN_CHECK(c.ready, "[cuda] expected tern::cuda_init() before CUDA work, got an uninitialised backend");
  return c.props;
}

bool is_capturing() {
  Context& c = context();
  if (!c.ready) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TERN_CUDA_CHECK(cudaStreamIsCapturing(c.stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

const void* constant_buffer(const void* host, size_t bytes) {
  Context& c = context();
  std::string key(static_cast<const char*>(host), bytes);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.constants.find(key);
  if (it != c.constants.end()) return it->second;
  TERN_CHECK(!is_capturing(), "[cuda] expected new constants before graph capture, got one during capture");
  void* p = device_alloc(bytes);
  TERN_CUDA_CHECK(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, c.stream));
  TERN_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  c.constants.emplace(std::move(key), p);
  return p;
}

unsigned* zeroed_counters() { return context().counters; }

}  // namespace tern::cuda

namespace tern {

bool cuda_available() {
  static const bool available = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return n > 0;
  }();
  return available;
}

std::string cuda_status() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no usable CUDA device: {}", cudaGetErrorString(err));
  }
  if (n == 0) return "no CUDA device found";
  return cuda_device_name();
}

void cuda_init() {
  const int index = 0;
  cuda::Context& c = cuda::context();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.ready) {
    TERN_CHECK(c.device == index, "[cuda] expected device {} (already initialised), got {}", c.device, index);
    return;
  }
  TERN_CHECK(cuda_available(), "[cuda] expected a CUDA device, got none (no GPU or the driver is too old)");
  int n = 0;
  TERN_CUDA_CHECK(cudaGetDeviceCount(&n));
  TERN_CHECK(index >= 0 && index < n, "[cuda] expected a device index in [0, {}), got {}", n, index);
  TERN_CUDA_CHECK(cudaSetDevice(index));
  TERN_CUDA_CHECK(cudaGetDeviceProperties(&c.props, index));
  TERN_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  void* counters = nullptr;
  TERN_CUDA_CHECK(cudaMalloc(&counters, cuda::kCounters * sizeof(unsigned)));
  TERN_CUDA_CHECK(cudaMemset(counters, 0, cuda::kCounters * sizeof(unsigned)));
  c.counters = static_cast<unsigned*>(counters);
  c.device = index;
  static cuda::CudaRuntime runtime;
  register_device_runtime(DeviceKind::cuda, &runtime);
  c.ready = true;
}

std::string cuda_device_name() {
  if (!cuda_available()) return "";
  cudaDeviceProp p{};
  int dev = cuda::context().ready ? cuda::context().device : 0;
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "";
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
                     static_cast<double>(p.totalGlobalMem) / (1 << 30));
}

int64_t cuda_free_memory() {
  cuda_init();
  size_t free = 0, total = 0;
  TERN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

}  // namespace tern
