// The caching device allocator: device blocks are reused after release instead of returning to
// cudaFree, so the steady-state decode loop never calls cudaMalloc. All work runs on one stream, so a
// block released by the host may be handed out again at once (stream order keeps it safe).
#pragma once
#include <cstddef>

namespace tern::cuda {

struct AllocatorStats {
  size_t cuda_mallocs = 0;   // calls of cudaMalloc so far
  size_t bytes_reserved = 0; // device bytes held (in use + cached)
  size_t bytes_in_use = 0;
};

// Returns a device pointer of at least `bytes` (256-byte aligned); never nullptr (throws tern::Error
// after freeing the cache and retrying once). bytes == 0 gets a valid, unique small block.
void* device_alloc(size_t bytes);
// Returns p (from device_alloc) to the cache.
void device_free(void* p);
// Frees every cached, unused block (cudaFree); blocks in use are untouched.
void empty_cache();
AllocatorStats allocator_stats();

// A private pool for captured CUDA graphs. While a pool is active, device_alloc serves it and frees
// of its blocks return to it, so a graph's buffers are never handed to eager work between replays
// (a replay writes the addresses it captured). Blocks of a destroyed pool that are still in use
// (e.g. a graph output someone holds) join the general cache when freed.
struct GraphPool;
GraphPool* create_graph_pool();
void destroy_graph_pool(GraphPool* pool);
// Makes `pool` (nullptr: the general cache) the target of device_alloc; returns the previous one.
GraphPool* set_active_pool(GraphPool* pool);

}  // namespace tern::cuda
