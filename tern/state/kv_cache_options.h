// How a model's attention layers store their context (`--kv-cache`, `--kv-group`, `--kv-start`,
// `--kv-boundary`), and the one factory every architecture builds its KV caches through.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "tern/state/cache.h"

namespace tern {

struct KVCacheOptions {
  // Storage kind as the user spells it: "bf16" (plain, activation dtype), "affine8", "affine4",
  // "turbo", "turbo:k<K>v<V>".
  std::string kind = "bf16";
  int64_t group = 64;     // affine group size along head_dim: 32, 64 or 128
  int64_t start = 0;      // bf16-first: stay unquantized until an append leaves >= start positions
  int64_t boundary = 0;   // keep the first and last `boundary` attention layers unquantized

  // Throws `[kv-cache] ...` naming the field when a value is out of range or a kind is unknown.
  void validate() const;
};

// What a model says about one attention layer when it asks for its cache.
struct KVLayerInfo {
  int64_t attention_index = 0;   // index among the layers that own a KV cache
  int64_t attention_layers = 1;  // how many layers own a KV cache
  int64_t window = 0;            // sliding-window size; 0 for full attention
  // TurboQuant read for this graph: values left rotated, one inverse rotation of the output per row.
  bool deferred_values = false;
};

// A storage kind parsed: plain ("bf16"), affine (key_bits == value_bits) or TurboQuant.
struct KVScheme {
  enum Type { plain, affine, turbo } type = plain;
  int key_bits = 0, value_bits = 0;
};

// Parses KVCacheOptions::kind; throws `[kv-cache] ...` for an unknown kind or unsupported bits.
KVScheme parse_kv_scheme(const std::string& kind);

// Whether make_kv_cache gives this layer a quantized storage: outside the boundary, and full attention
// or (affine kinds only) a sliding-window ring.
bool kv_layer_is_quantized(const KVCacheOptions& options, const KVLayerInfo& layer);

// Bytes one token takes in this layer's cache once quantized (plain layers: plain_element_bytes per
// element): n_head_kv rows of keys [head_dim] and values [value_dim].
int64_t kv_bytes_per_token(const KVCacheOptions& options, const KVLayerInfo& layer, int64_t n_head_kv,
                           int64_t head_dim, int64_t value_dim, int64_t plain_element_bytes);

// The cache for one attention layer: sliding layers (window > 0) get a ring of `window` positions
// (affine kinds: an affine ring; TurboQuant kinds: the plain ring), full layers the storage `options`
// names (with the boundary layers kept unquantized); a quantized storage sits behind the bf16-first
// transition at `options.start`.
std::unique_ptr<KVCache> make_kv_cache(const KVCacheOptions& options, const KVLayerInfo& layer);

}  // namespace tern
