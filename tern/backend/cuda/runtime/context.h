// The CUDA context of the engine: the current device, the one stream all tern work is queued on,
// and small helpers the backend files share. Only runtime/ creates or destroys CUDA handles.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tern::cuda {

// True once tern::cuda_init() has run.
bool initialized();
// The engine stream (non-blocking, created by tern::cuda_init). Throws if CUDA is not initialised.
cudaStream_t stream();
// Properties of the device in use (read once at init).
const cudaDeviceProp& device_props();
// True while the engine stream is capturing a CUDA graph (no host syncs or allocations allowed).
bool is_capturing();
// Copies `bytes` of host data into a device buffer that lives as long as the process, keyed by the
// content: repeated calls with equal bytes return the same pointer (rope tables, small constants).
const void* constant_buffer(const void* host, size_t bytes);
// kCounters device counters at zero (made by tern::cuda_init), for kernels whose last block to finish
// does the final work; each launch leaves the counters it used at zero. One set serves every kernel:
// all launches go to the one engine stream and wait for their predecessor before counting, so two
// never count at once.
constexpr int64_t kCounters = 4096;
unsigned* zeroed_counters();

}  // namespace tern::cuda
