// Affine (MLX-style) quantized KV storage, signature "kv:affine:<bits>:<group>": each head row is cut
// into groups of G along head_dim; per group an f16 scale = (max - min) / (2^bits - 1) and an f16
// bias = min, codes q = round((x - bias) / scale) in [0, 2^bits) bit-packed (4-bit: two per byte).
#pragma once
#include "tern/state/quantized_kv_cache.h"

namespace tern {

class AffineKVCache : public QuantizedKVCache {
 public:
  const char* kind_name() const override { return "affine"; }
  // bits 4 or 8; group 32, 64 or 128 (head_dim must be a multiple of it; checked at the first append).
  AffineKVCache(int bits, int64_t group);
  std::string signature() const override;
  ops::KVRowCodec key_codec() const override { return key_; }
  ops::KVRowCodec value_codec() const override { return value_; }

 protected:
  void configure(int64_t key_dim, int64_t value_dim) override;

 private:
  ops::KVRowCodec key_{ops::KVRowCodec::affine}, value_{ops::KVRowCodec::affine};
};

}  // namespace tern
