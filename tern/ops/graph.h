// Captured device work (CUDA graphs), for the upper layers: a private memory pool, capture of the work
// a function queues on the engine stream, and replay. Defined by backend/cuda (backend/no_cuda throws).
#pragma once
#include <functional>
#include <memory>
#include <span>

#include "tern/core/tensor.h"

namespace tern {

// Device memory that captured graphs allocate from: blocks freed during a capture are reused by later
// allocations of captures in the same pool, and never by eager work, so replays can rewrite them.
// Replays of graphs sharing a pool must not overlap (they run in order on the engine stream).
class GraphMemory {
 public:
  virtual ~GraphMemory() = default;
};
std::unique_ptr<GraphMemory> make_graph_memory();

// One captured graph; replay() queues it on the engine stream (no host sync).
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
  virtual void replay() = 0;
};

// Runs `body` with the engine stream capturing and allocations served by `memory`, and returns the
// instantiated graph. Nothing `body` queues executes until replay(). body must not synchronise with
// the host (a device-to-host copy, a host read of device data): that fails the capture with
// "[cuda] ... capture ..." and leaves nothing captured. Throws "[graph] needs a CUDA build" without CUDA.
std::unique_ptr<CapturedGraph> capture_graph(GraphMemory& memory, const std::function<void()>& body);

// Copies of small device results to pinned host memory, queued on the engine stream behind the work
// queued so far, so a host loop can queue its next step before it reads this one's results. `slots`
// slots of `bytes` each: queue(slot, srcs) copies the srcs' bytes back to back into the slot, and
// wait(slot) blocks until that slot's last queued copies are done and returns them. A slot must not be
// queued again before its copies are read. Throws "[readback] needs a CUDA build" without CUDA.
class DeviceReadback {
 public:
  virtual ~DeviceReadback() = default;
  virtual void queue(int slot, std::span<const Tensor> srcs) = 0;
  virtual const std::byte* wait(int slot) const = 0;
};
std::unique_ptr<DeviceReadback> make_device_readback(int slots, size_t bytes);

// Blocks until the engine stream has finished all queued work (no-op without CUDA).
void device_synchronize();

}  // namespace tern
