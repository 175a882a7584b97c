// CPU-only build: no graphs to capture.
#include "tern/base/error.h"
#include "tern/ops/graph.h"

namespace tern {

std::unique_ptr<GraphMemory> make_graph_memory() { TERN_THROW("[graph] needs a CUDA build"); }
std::unique_ptr<CapturedGraph> capture_graph(GraphMemory&, const std::function<void()>&) {
  TERN_THROW("[graph] needs a CUDA build");
}
std::unique_ptr<DeviceReadback> make_device_readback(int, size_t) { TERN_THROW("[readback] needs a CUDA build"); }
void device_synchronize() {}

}  // namespace tern
