// TransitionKVCache: delegation to the plain or the quantized storage, and the one-way conversion.
#include "tern/state/transition_kv_cache.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"

namespace tern {

TransitionKVCache::TransitionKVCache(int64_t start, std::unique_ptr<QuantizedKVCache> quantized)
    : start_(start), quantized_(std::move(quantized)) {
  TERN_CHECK(start >= 0, "[kv-cache] expected a non-negative start, got {}", start);
  TERN_CHECK(quantized_ != nullptr && quantized_->offset() == 0, "[kv-cache] expected an empty quantized storage");
}

std::string TransitionKVCache::signature() const {
  return converted_ ? quantized_->signature() : plain_.signature();
}

int64_t TransitionKVCache::offset() const { return converted_ ? quantized_->offset() : plain_.offset(); }

Tensor TransitionKVCache::rope_positions(const Tensor& x, const ops::RopeTable& rope) const {
  return converted_ ? quantized_->rope_positions(x, rope) : plain_.rope_positions(x, rope);
}

int64_t TransitionKVCache::trim(int64_t n) { return converted_ ? quantized_->trim(n) : plain_.trim(n); }

int64_t TransitionKVCache::minimum_reusable_offset() const {
  return converted_ ? std::min(transition_, quantized_->offset()) : 0;
}

int64_t TransitionKVCache::max_append_tokens() const {
  if (converted_) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(start_ - plain_.offset(), 1);
}

int64_t TransitionKVCache::bytes() const { return plain_.bytes() + quantized_->bytes(); }

std::unique_ptr<AttentionRead> TransitionKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  if (converted_) return quantized_->append(k, v, phase);
  TERN_CHECK(k.device().is_cpu(), "[kv-cache] {} storage is not implemented on CUDA yet", quantized_->kind_name());
  std::unique_ptr<AttentionRead> read = plain_.append(k, v, phase);
  if (plain_.offset() >= start_) {
    // The read keeps views of the plain buffers alive; the cache itself lets them go.
    quantized_->store(plain_.keys(), plain_.values());
    transition_ = plain_.offset();
    plain_ = PlainKVCache();
    converted_ = true;
  }
  return read;
}

}  // namespace tern
