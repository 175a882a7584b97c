// Affine (MLX-style) quantized KV storage, signature "kv:affine:<bits>:<group>": each head row is cut
// into groups of G along head_dim; per group an f16 scale = (max - min) / (2^bits - 1) and an f16
// bias = min, codes q = round((x - bias) / scale) in [0, 2^bits) bit-packed (4-bit: two per byte).
#pragma once
#include "tern/ops/affine_codec.h"
#include "tern/state/quantized_kv_cache.h"

namespace tern {

class AffineKVCache : public QuantizedKVCache {
 public:
  const char* kind_name() const override { return "affine"; }
  // bits 4 or 8; group 32, 64 or 128 (head_dim must be a multiple of it; checked at the first append).
  AffineKVCache(int bits, int64_t group);
  std::string signature() const override;
  ops::KVRowCodec key_codec() const override { return {ops::KVRowCodec::affine, key_.bits, key_.group, key_.dim}; }
  ops::KVRowCodec value_codec() const override {
    return {ops::KVRowCodec::affine, value_.bits, value_.group, value_.dim};
  }

 protected:
  void configure(int64_t key_dim, int64_t value_dim, int64_t& key_row_bytes, int64_t& value_row_bytes) override;
  void encode_key(const float* x, uint8_t* out) const override { key_.encode(x, out); }
  void decode_key(const uint8_t* in, float* x) const override { key_.decode(in, x); }
  void encode_value(const float* x, uint8_t* out) const override { value_.encode(x, out); }
  void decode_value_for_read(const uint8_t* in, float* x) const override { value_.decode(in, x); }

 private:
  AffineRowCodec key_, value_;
};

}  // namespace tern
