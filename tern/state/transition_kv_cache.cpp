// TransitionKVCache: the conversion of the plain prefix into the quantized storage.
#include "tern/state/transition_kv_cache.h"

#include "tern/base/error.h"

namespace tern {

TransitionKVCache::TransitionKVCache(int64_t start, std::unique_ptr<QuantizedKVCache> quantized)
    : TransitionBase(start), quantized_(std::move(quantized)) {
  TERN_CHECK(quantized_ != nullptr && quantized_->offset() == 0, "[kv-cache] expected an empty quantized storage");
}

void TransitionKVCache::convert() {
  quantized_->store(plain_.keys(), plain_.values());
  plain_ = PlainKVCache();
}

}  // namespace tern
