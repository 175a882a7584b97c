// TurboQuant KV storage, signature "kv:turboquant:k<K>v<V>" (K in {8, 4, 3}; V in {2, 3, 4, 8}): keys
// int8 per group of 32 (K = 8) or, as the paper's TurboQuant_mse (K = 4, 3), rotated and Lloyd-Max coded
// as values are; values rotated and Lloyd-Max coded (tern/ops/turboquant.h). On CUDA the fused decode
// read takes keys of 4 or 3 bits too (ops::kv_decode_attention_supported; TERN_CUDA_KV_ROTATED_KEYS=0
// reads them through a decoded temporary). Two reads, fixed per
// cache: decoded (values rotated back to their own domain, ordinary attention) or deferred (attention
// over the still-rotated values, then one inverse rotation per output row; attention is linear in V).
#pragma once
#include "tern/state/quantized_kv_cache.h"

namespace tern {

class TurboQuantKVCache : public QuantizedKVCache {
 public:
  const char* kind_name() const override { return "turboquant"; }
  // key_bits 8, 4 or 3; value_bits 2, 3, 4 or 8.
  TurboQuantKVCache(int key_bits, int value_bits, bool deferred_values);
  std::string signature() const override;
  bool deferred_values() const override { return deferred_; }
  ops::KVRowCodec key_codec() const override { return {ops::KVRowCodec::turbo_key, key_bits_, 32, key_dim_}; }
  ops::KVRowCodec value_codec() const override {
    return {ops::KVRowCodec::turbo_value, value_bits_, 32, value_dim_};
  }

 protected:
  void configure(int64_t key_dim, int64_t value_dim) override;

 private:
  int key_bits_ = 8, value_bits_ = 3;
  bool deferred_ = false;
};

}  // namespace tern
