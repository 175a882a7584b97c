// AffineKVCache: the storage's configuration of the affine row codec (tern/ops/affine_codec.h).
#include "tern/state/affine_kv_cache.h"

#include "tern/base/error.h"

namespace tern {

AffineKVCache::AffineKVCache(int bits, int64_t group) {
  TERN_CHECK(bits == 4 || bits == 8, "[kv-cache] expected affine bits of 4 or 8, got {}", bits);
  TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-cache] expected a group of 32, 64 or 128, got {}", group);
  key_.bits = value_.bits = bits;
  key_.group = value_.group = group;
}

std::string AffineKVCache::signature() const {
  return "kv:affine:" + std::to_string(key_.bits) + ":" + std::to_string(key_.group);
}

void AffineKVCache::configure(int64_t key_dim, int64_t value_dim) {
  for (int64_t d : {key_dim, value_dim})
    TERN_CHECK(d % key_.group == 0 && d <= 1024,
               "[kv-cache] affine storage expects head_dim a multiple of the group {} (at most 1024), got {}",
               key_.group, d);
  key_.dim = key_dim;
  value_.dim = value_dim;
}

}  // namespace tern
