// RingTransitionKVCache: the one-way conversion of the plain ring into the affine ring.
#include "tern/state/ring_transition_kv_cache.h"

#include "tern/base/error.h"

namespace tern {
namespace {
int64_t checked_window(const std::unique_ptr<AffineRingKVCache>& q) {
  TERN_CHECK(q != nullptr && q->offset() == 0, "[kv-cache] expected an empty affine ring");
  return q->window();
}
}  // namespace

RingTransitionKVCache::RingTransitionKVCache(int64_t start, std::unique_ptr<AffineRingKVCache> quantized)
    : TransitionBase(start), plain_(checked_window(quantized)), quantized_(std::move(quantized)) {}

void RingTransitionKVCache::convert() {
  quantized_->adopt(plain_.temporal_keys(), plain_.temporal_values(), plain_.offset());
  plain_ = RingKVCache(plain_.window());
}

}  // namespace tern
