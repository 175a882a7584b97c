// KVCacheOptions validation and the KV cache factory.
#include "tern/state/kv_cache_options.h"

#include <cstdio>

#include "tern/base/error.h"
#include "tern/ops/affine_codec.h"
#include "tern/ops/kv_quant.h"
#include "tern/ops/turboquant.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/affine_ring_kv_cache.h"
#include "tern/state/plain_kv_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/ring_transition_kv_cache.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {

KVScheme parse_kv_scheme(const std::string& kind) {
  KVScheme s;
  if (kind == "bf16") return s;
  if (kind == "affine8" || kind == "affine4") {
    s.type = KVScheme::affine;
    s.key_bits = s.value_bits = kind == "affine8" ? 8 : 4;
    return s;
  }
  if (kind == "turbo" || kind.rfind("turbo:", 0) == 0) {
    s.type = KVScheme::turbo;
    s.key_bits = 8;
    s.value_bits = 3;
    if (kind == "turbo") return s;
    int kb = 0, vb = 0, used = 0;
    const std::string spec = kind.substr(6);
    TERN_CHECK(std::sscanf(spec.c_str(), "k%dv%d%n", &kb, &vb, &used) == 2 && used == static_cast<int>(spec.size()),
               "[kv-cache] expected turbo:k<K>v<V> (e.g. turbo:k8v3), got '{}'", kind);
    TERN_CHECK(kb == 8 || kb == 4 || kb == 3, "[kv-cache] expected turbo key bits 8, 4 or 3, got '{}'", kind);
    TERN_CHECK(vb == 2 || vb == 3 || vb == 4 || vb == 8, "[kv-cache] expected turbo value bits 2, 3, 4 or 8, got '{}'",
               kind);
    s.key_bits = kb;
    s.value_bits = vb;
    return s;
  }
  TERN_THROW("[kv-cache] unsupported storage '{}' (supported: bf16, affine8, affine4, turbo, turbo:k<8|4|3>v<2|3|4|8>)",
             kind);
}

void KVCacheOptions::validate() const {
  parse_kv_scheme(kind);
  TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-cache] expected a group of 32, 64 or 128, got {}", group);
  TERN_CHECK(start >= 0, "[kv-cache] expected a non-negative start, got {}", start);
  TERN_CHECK(boundary >= 0, "[kv-cache] expected a non-negative boundary, got {}", boundary);
}

bool kv_layer_is_quantized(const KVCacheOptions& options, const KVLayerInfo& layer) {
  const KVScheme::Type type = parse_kv_scheme(options.kind).type;
  // Sliding layers take affine storage on their ring; TurboQuant is for full-attention layers only.
  if (type == KVScheme::plain || (layer.window > 0 && type != KVScheme::affine)) return false;
  return layer.attention_index >= options.boundary && layer.attention_index < layer.attention_layers - options.boundary;
}

int64_t kv_bytes_per_token(const KVCacheOptions& options, const KVLayerInfo& layer, int64_t n_head_kv,
                           int64_t head_dim, int64_t value_dim, int64_t plain_element_bytes) {
  if (!kv_layer_is_quantized(options, layer)) return n_head_kv * (head_dim + value_dim) * plain_element_bytes;
  const KVScheme s = parse_kv_scheme(options.kind);
  if (s.type == KVScheme::affine)
    return n_head_kv * (AffineRowCodec::row_bytes(s.key_bits, options.group, head_dim) +
                        AffineRowCodec::row_bytes(s.value_bits, options.group, value_dim));
  return n_head_kv *
         (ops::KVRowCodec{ops::KVRowCodec::turbo_key, s.key_bits, turboquant::kGroup, head_dim}.row_bytes() +
          turboquant::value_row_bytes(s.value_bits, value_dim));
}

std::unique_ptr<KVCache> make_kv_cache(const KVCacheOptions& options, const KVLayerInfo& layer) {
  options.validate();
  if (kv_layer_is_quantized(options, layer)) {
    const KVScheme s = parse_kv_scheme(options.kind);
    if (layer.window > 0)
      return std::make_unique<RingTransitionKVCache>(
          options.start, std::make_unique<AffineRingKVCache>(layer.window, s.key_bits, options.group));
    std::unique_ptr<QuantizedKVCache> q;
    if (s.type == KVScheme::affine) q = std::make_unique<AffineKVCache>(s.key_bits, options.group);
    else q = std::make_unique<TurboQuantKVCache>(s.key_bits, s.value_bits, layer.deferred_values);
    return std::make_unique<TransitionKVCache>(options.start, std::move(q));
  }
  if (layer.window > 0) return std::make_unique<RingKVCache>(layer.window);
  return std::make_unique<PlainKVCache>();
}

}  // namespace tern
