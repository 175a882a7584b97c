// CUDA graph capture on the engine stream, with allocations routed to a private pool while capturing.
#include <cuda_runtime_api.h>

#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/backend/cuda/runtime/check.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/base/error.h"
#include "tern/ops/graph.h"

namespace tern {
namespace {

class CudaGraphMemory final : public GraphMemory {
 public:
  CudaGraphMemory() : pool_(cuda::create_graph_pool()) {}
  ~CudaGraphMemory() override {
    // Replays may still be queued: their blocks must not be handed out before they finish.
    (void)cudaStreamSynchronize(cuda::stream());
    cuda::destroy_graph_pool(pool_);
  }
  cuda::GraphPool* pool() const { return pool_; }

 private:
  cuda::GraphPool* pool_;
};

class CudaGraph final : public CapturedGraph {
 public:
  CudaGraph(cudaGraph_t g, cudaGraphExec_t e) : graph_(g), exec_(e) {}
  ~CudaGraph() override {
    (void)cudaStreamSynchronize(cuda::stream());
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
  }
  void replay() override { TERN_CUDA_CHECK(cudaGraphLaunch(exec_, cuda::stream())); }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
};

}  // namespace

std::unique_ptr<GraphMemory> make_graph_memory() { return std::make_unique<CudaGraphMemory>(); }

std::unique_ptr<CapturedGraph> capture_graph(GraphMemory& memory, const std::function<void()>& body) {
  auto& mem = dynamic_cast<CudaGraphMemory&>(memory);
  cudaStream_t s = cuda::stream();
  TERN_CHECK(!cuda::is_capturing(), "[graph] expected no capture in progress, got a nested capture");
  // Relaxed: allocating a new pool block (cudaMalloc) is allowed mid-capture; a sync on the stream still
  // fails the capture.
  TERN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  cuda::GraphPool* prev = cuda::set_active_pool(mem.pool());
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cuda::set_active_pool(prev);
    (void)cudaStreamEndCapture(s, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  cuda::set_active_pool(prev);
  TERN_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    cuda::throw_cuda_error(err, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  TERN_CUDA_CHECK(cudaGraphUpload(exec, s));
  return std::make_unique<CudaGraph>(graph, exec);
}

void device_synchronize() {
  if (!cuda::initialized()) return;
  if (cuda::is_capturing()) TERN_THROW("[graph] expected no host sync during capture");
  TERN_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
}

}  // namespace tern
