// DeviceReadback on CUDA: pinned host slots, one event each, copies queued on the engine stream.
#include <cuda_runtime_api.h>

#include <vector>

#include "tern/backend/cuda/runtime/check.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/base/error.h"
#include "tern/ops/graph.h"

namespace tern {
namespace {

class CudaReadback final : public DeviceReadback {
 public:
  CudaReadback(int slots, size_t bytes) : bytes_(bytes), events_(static_cast<size_t>(slots), nullptr) {
    TERN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), static_cast<size_t>(slots) * bytes));
    for (auto& e : events_) TERN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~CudaReadback() override {
    (void)cudaStreamSynchronize(cuda::stream());
    for (auto e : events_)
      if (e) (void)cudaEventDestroy(e);
    (void)cudaFreeHost(host_);
  }

  void queue(int slot, std::span<const Tensor> srcs) override {
    check_slot(slot);
    size_t off = 0;
    for (const Tensor& t : srcs) {
      TERN_CHECK(t.device().is_cuda() && t.is_contiguous(), "[readback] expected contiguous CUDA tensors");
      const size_t n = t.nbytes();
      TERN_CHECK(off + n <= bytes_, "[readback] expected at most {} bytes a slot, got {}", bytes_, off + n);
      TERN_CUDA_CHECK(cudaMemcpyAsync(host_ + static_cast<size_t>(slot) * bytes_ + off, t.data_ptr(), n,
                                      cudaMemcpyDeviceToHost, cuda::stream()));
      off += n;
    }
    TERN_CUDA_CHECK(cudaEventRecord(events_[slot], cuda::stream()));
  }

  const std::byte* wait(int slot) const override {
    check_slot(slot);
    TERN_CUDA_CHECK(cudaEventSynchronize(events_[slot]));
    return host_ + static_cast<size_t>(slot) * bytes_;
  }

 private:
  void check_slot(int slot) const {
    TERN_CHECK(slot >= 0 && slot < static_cast<int>(events_.size()), "[readback] expected a slot in [0, {}), got {}",
               events_.size(), slot);
  }
  size_t bytes_;
  std::byte* host_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<DeviceReadback> make_device_readback(int slots, size_t bytes) {
  TERN_CHECK(slots > 0 && bytes > 0, "[readback] expected slots and bytes > 0, got {} and {}", slots, bytes);
  return std::make_unique<CudaReadback>(slots, bytes);
}

}  // namespace tern
