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

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;   // size -> block
  std::unordered_map<void*, size_t> in_use;   // block -> size
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

void* device_alloc(size_t bytes) {
  Cache& c = cache();
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.free_blocks.lower_bound(size);
  if (it != c.free_blocks.end() && fits(it->first, size)) {
    void* p = it->second;
    size_t have = it->first;
    c.free_blocks.erase(it);
    c.in_use.emplace(p, have);
    c.stats.bytes_in_use += have;
    return p;
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
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
  c.in_use.emplace(p, size);
  return p;
}

void device_free(void* p) {
  if (!p) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.in_use.find(p);
  TERN_ASSERT(it != c.in_use.end(), "device_free of a pointer the allocator did not hand out");
  c.stats.bytes_in_use -= it->second;
  c.free_blocks.emplace(it->second, p);
  c.in_use.erase(it);
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
