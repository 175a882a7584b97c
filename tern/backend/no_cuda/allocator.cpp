// CPU-only build: the CUDA caching allocator holds nothing.
#include "tern/backend/cuda/runtime/allocator.h"

#include "tern/base/error.h"

namespace tern::cuda {

void* device_alloc(size_t) { TERN_THROW("[cuda] device_alloc needs a CUDA build"); }
void device_free(void*) {}
void empty_cache() {}
AllocatorStats allocator_stats() { return {}; }

}  // namespace tern::cuda
