// Shared helpers of the cache contract.
#include "tern/state/cache.h"

#include "tern/base/error.h"

namespace tern {

void Cache::save(CacheWriter&) const {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

void Cache::load(CacheReader&) {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

Tensor uniform_positions(int64_t offset, int64_t n) {
  Tensor p = Tensor::empty({n}, Dtype::i32);
  int32_t* d = p.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(offset + i);
  return p;
}

}  // namespace tern
