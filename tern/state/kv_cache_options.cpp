// KVCacheOptions validation and the KV cache factory.
#include "tern/state/kv_cache_options.h"

#include "tern/base/error.h"
#include "tern/state/plain_kv_cache.h"
#include "tern/state/ring_kv_cache.h"

namespace tern {

void KVCacheOptions::validate() const {
  TERN_CHECK(kind == "bf16", "[kv-cache] unsupported storage '{}' (supported: bf16)", kind);
  TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-cache] expected a group of 32, 64 or 128, got {}", group);
  TERN_CHECK(start >= 0, "[kv-cache] expected a non-negative start, got {}", start);
  TERN_CHECK(boundary >= 0, "[kv-cache] expected a non-negative boundary, got {}", boundary);
}

std::unique_ptr<KVCache> make_kv_cache(const KVCacheOptions& options, const KVLayerInfo& layer) {
  options.validate();
  if (layer.window > 0) return std::make_unique<RingKVCache>(layer.window);
  return std::make_unique<PlainKVCache>();
}

}  // namespace tern
