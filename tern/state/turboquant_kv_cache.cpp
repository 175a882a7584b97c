// TurboQuantKVCache: the configuration of QuantizedKVCache for TurboQuant keys and values.
#include "tern/state/turboquant_kv_cache.h"

#include "tern/base/error.h"
#include "tern/ops/turboquant.h"

namespace tern {

TurboQuantKVCache::TurboQuantKVCache(int key_bits, int value_bits, bool deferred_values)
    : key_bits_(key_bits), value_bits_(value_bits), deferred_(deferred_values) {
  TERN_CHECK(key_bits == 8 || key_bits == 4 || key_bits == 3, "[kv-cache] expected turbo key bits 8, 4 or 3, got {}",
             key_bits);
  TERN_CHECK(value_bits == 2 || value_bits == 3 || value_bits == 4 || value_bits == 8,
             "[kv-cache] expected turbo value bits 2, 3, 4 or 8, got {}", value_bits);
}

std::string TurboQuantKVCache::signature() const {
  return "kv:turboquant:k" + std::to_string(key_bits_) + "v" + std::to_string(value_bits_);
}

void TurboQuantKVCache::configure(int64_t key_dim, int64_t value_dim) {
  TERN_CHECK(key_dim % turboquant::kGroup == 0 && key_dim <= 512,
             "[kv-cache] turboquant keys expect head_dim a multiple of 32 (at most 512), got {}", key_dim);
  turboquant::signs(value_dim);  // throws unless value_dim is a power of two in [32, 512]
  if (key_bits_ != 8) turboquant::signs(key_dim);  // rotated keys too
}

}  // namespace tern
