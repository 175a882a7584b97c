// TransitionKVCache: the conversion of the plain prefix and compiled decode on the quantized storage.
#include "tern/state/transition_kv_cache.h"

#include "tern/base/error.h"

namespace tern {

TransitionKVCache::TransitionKVCache(int64_t start, std::unique_ptr<QuantizedKVCache> quantized)
    : TransitionBase(start), quantized_(std::move(quantized)) {
  TERN_CHECK(quantized_ != nullptr && quantized_->offset() == 0, "[kv-cache] expected an empty quantized storage");
}

void TransitionKVCache::reserve(int64_t positions) {
  TERN_CHECK(converted_, "[kv-cache] storage {} does not support compiled decode before its transition", signature());
  quantized_->reserve(positions);
}

void TransitionKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || converted_, "[kv-cache] storage {} does not support compiled decode before its transition",
             signature());
  if (converted_) quantized_->attach_step(step);
}

void TransitionKVCache::advance(int64_t n) {
  TERN_CHECK(converted_, "[kv-cache] storage {} does not support compiled decode before its transition", signature());
  quantized_->advance(n);
}

void TransitionKVCache::convert() {
  quantized_->store(plain_.keys(), plain_.values());
  plain_ = PlainKVCache();
}

}  // namespace tern
