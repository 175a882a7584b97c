// Cache memory from a model's layer layout.
#include "tern/models/cache_layout.h"

#include <algorithm>

namespace tern {
namespace {

// Bytes per position of each layer (0 for shared and recurrent ones), in layer order.
std::vector<int64_t> per_position(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv,
                                  int64_t plain_element_bytes) {
  int64_t owners = 0;
  for (const auto& l : layers) owners += l.kind == LayerCacheSpec::full || l.kind == LayerCacheSpec::sliding ? 1 : 0;
  std::vector<int64_t> out;
  int64_t index = 0;
  for (const auto& l : layers) {
    if (l.kind != LayerCacheSpec::full && l.kind != LayerCacheSpec::sliding) {
      out.push_back(0);
      continue;
    }
    const KVLayerInfo info{.attention_index = index++,
                           .attention_layers = owners,
                           .window = l.kind == LayerCacheSpec::sliding ? l.window : 0};
    out.push_back(kv_bytes_per_token(kv, info, l.n_head_kv, l.head_dim, l.value_dim, plain_element_bytes));
  }
  return out;
}

}  // namespace

CacheBytes cache_bytes(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv, int64_t context,
                       int64_t plain_element_bytes) {
  const std::vector<int64_t> per = per_position(layers, kv, plain_element_bytes);
  CacheBytes b;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCacheSpec& l = layers[i];
    if (l.kind == LayerCacheSpec::full) b.full += per[i] * context;
    else if (l.kind == LayerCacheSpec::sliding) b.sliding += per[i] * std::min(context, l.window);
    else if (l.kind == LayerCacheSpec::recurrent) b.recurrent += l.fixed_bytes;
  }
  return b;
}

int64_t cache_bytes_per_token(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv,
                              int64_t plain_element_bytes) {
  const std::vector<int64_t> per = per_position(layers, kv, plain_element_bytes);
  int64_t sum = 0;
  for (size_t i = 0; i < layers.size(); ++i) sum += layers[i].kind == LayerCacheSpec::full ? per[i] : 0;
  return sum;
}

int64_t context_that_fits(const std::vector<LayerCacheSpec>& layers, const KVCacheOptions& kv,
                          int64_t plain_element_bytes, double budget) {
  auto fits = [&](int64_t n) { return static_cast<double>(cache_bytes(layers, kv, n, plain_element_bytes).total()) <= budget; };
  int64_t lo = 0, hi = int64_t{1} << 40;  // fits(lo) or lo == 0; the answer is in [lo, hi]
  if (!fits(1)) return 0;
  if (fits(hi)) return hi;
  lo = 1;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace tern
