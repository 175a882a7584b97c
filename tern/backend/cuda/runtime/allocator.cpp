// The caching device allocator: size-rounded blocks kept in free lists keyed by size.
#include "tern/backend/cuda/runtime/allocator.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "tern/backend/cuda/runtime/check.h"
#include "tern/base/error.h"

namespace tern::cuda {
namespace {

constexpr size_t kSmall = size_t{1} << 20;       // blocks below 1 MiB round to 512 bytes
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;  // larger blocks round to 2 MiB

struct Block {
  size_t size = 0;
  GraphPool* pool = nullptr;  // owner; nullptr: the general cache
};

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;   // size -> block (general cache)
  std::unordered_map<void*, Block> in_use;
  GraphPool* active = nullptr;
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may die after static destructors run
  return *c;
}

size_t round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < kSmall) return (bytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

// A cached block of `have` bytes may serve a request of `want` without wasting too much.
bool fits(size_t have, size_t want) {
  if (want < kSmall) return have < kSmall && have <= 2 * want;
  return have <= want + want / 8 + kLargeRound;
}

void free_cached_locked(Cache& c) {
  if (c.free_blocks.empty()) return;
  TERN_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto& [size, p] : c.free_blocks) {
    TERN_CUDA_CHECK(cudaFree(p));
    c.stats.bytes_reserved -= size;
  }
  c.free_blocks.clear();
}

}  // namespace

struct GraphPool {
  std::multimap<size_t, void*> free_blocks;
};

namespace {

// Takes a cached block of about `size` bytes from `blocks`, or nullptr.
void* take(std::multimap<size_t, void*>& blocks, size_t size, size_t& have) {
  auto it = blocks.lower_bound(size);
  if (it == blocks.end() || !fits(it->first, size)) return nullptr;
  void* p = it->second;
  have = it->first;
  blocks.erase(it);
  return p;
}

}  // namespace

void* device_alloc(size_t bytes) {
  Cache& c = cache();
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(c.mu);
  size_t have = 0;
  void* hit = take(c.active ? c.active->free_blocks : c.free_blocks, size, have);
  if (hit) {
    c.in_use.emplace(hit, Block{have, c.active});
    c.stats.bytes_in_use += have;
    return hit;
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation && !c.active) {
    (void)cudaGetLastError();  // clear the sticky-free error before retrying
    free_cached_locked(c);
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    TERN_THROW("[cuda] expected to allocate {} bytes on the device, got {} ({} bytes in use, {} reserved)", bytes,
               cudaGetErrorString(err), c.stats.bytes_in_use, c.stats.bytes_reserved);
  }
  c.stats.cuda_mallocs += 1;
  c.stats.bytes_reserved += size;
  c.stats.bytes_in_use += size;
  c.in_use.emplace(p, Block{size, c.active});
  return p;
}

void device_free(void* p) {
  if (!p) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.in_use.find(p);
  TERN_ASSERT(it != c.in_use.end(), "device_free of a pointer the allocator did not hand out");
  const Block b = it->second;
  c.stats.bytes_in_use -= b.size;
  (b.pool ? b.pool->free_blocks : c.free_blocks).emplace(b.size, p);
  c.in_use.erase(it);
}

GraphPool* create_graph_pool() { return new GraphPool(); }

void destroy_graph_pool(GraphPool* pool) {
  if (!pool) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  TERN_ASSERT(c.active != pool, "destroy_graph_pool of the active pool");
  c.free_blocks.insert(pool->free_blocks.begin(), pool->free_blocks.end());
  for (auto& [p, b] : c.in_use)
    if (b.pool == pool) b.pool = nullptr;
  delete pool;
}

GraphPool* set_active_pool(GraphPool* pool) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  GraphPool* prev = c.active;
  c.active = pool;
  return prev;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  free_cached_locked(c);
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace tern::cuda
