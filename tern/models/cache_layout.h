// What each layer's cache holds, as a model describes it (Model::cache_layout), and the memory that
// takes at a context length: full-attention layers grow with it, sliding ones stop at their window,
// KV-sharing layers hold nothing, recurrent layers hold a fixed state.
#pragma once
#include <cstdint>
#include <vector>

#include "tern/state/kv_cache_options.h"

namespace tern {

struct LayerCacheSpec {
  enum Kind { full, sliding, shared, recurrent } kind = full;
  int64_t window = 0;                                  // sliding: positions kept
  int64_t n_head_kv = 0, head_dim = 0, value_dim = 0;  // full and sliding: per position
  int64_t fixed_bytes = 0;                             // recurrent: state bytes per sequence
  bool operator==(const LayerCacheSpec&) const = default;
};

// Bytes one sequence's caches take at `context` tokens under `kv` (make_kv_cache's choices: full and
// sliding layers are numbered in layer order for the boundary); plain storage takes plain_element_bytes
// per element.
struct CacheBytes {
  int64_t full = 0, sliding = 0, recurrent = 0;
  int64_t total() const { return full + sliding + recurrent; }
};
CacheBytes cache_bytes(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv, int64_t context,
                       int64_t plain_element_bytes);
// Bytes each further token adds once every sliding window is full (the full layers' share).
int64_t cache_bytes_per_token(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv,
                              int64_t plain_element_bytes);
// The longest context whose caches fit in `budget` bytes (0 if not even one token fits; capped at 2^40).
int64_t context_that_fits(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv,
                          int64_t plain_element_bytes, double budget);

}  // namespace tern
