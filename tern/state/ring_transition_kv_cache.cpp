// RingTransitionKVCache: delegation to the plain or the affine ring, and the one-way conversion.
#include "tern/state/ring_transition_kv_cache.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"

namespace tern {
namespace {
int64_t checked_window(const std::unique_ptr<AffineRingKVCache>& q) {
  TERN_CHECK(q != nullptr && q->offset() == 0, "[kv-cache] expected an empty affine ring");
  return q->window();
}
}  // namespace

RingTransitionKVCache::RingTransitionKVCache(int64_t start, std::unique_ptr<AffineRingKVCache> quantized)
    : start_(start), plain_(checked_window(quantized)), quantized_(std::move(quantized)) {
  TERN_CHECK(start >= 0, "[kv-cache] expected a non-negative start, got {}", start);
}

std::string RingTransitionKVCache::signature() const {
  return converted_ ? quantized_->signature() : plain_.signature();
}

int64_t RingTransitionKVCache::offset() const { return converted_ ? quantized_->offset() : plain_.offset(); }

Tensor RingTransitionKVCache::next_positions(int64_t n) const {
  return converted_ ? quantized_->next_positions(n) : plain_.next_positions(n);
}

bool RingTransitionKVCache::is_trimmable() const {
  return converted_ ? quantized_->is_trimmable() : plain_.is_trimmable();
}

int64_t RingTransitionKVCache::trim(int64_t n) { return converted_ ? quantized_->trim(n) : plain_.trim(n); }

int64_t RingTransitionKVCache::minimum_reusable_offset() const {
  return converted_ ? std::min(transition_, quantized_->offset()) : 0;
}

int64_t RingTransitionKVCache::max_append_tokens() const {
  if (converted_) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(start_ - plain_.offset(), 1);
}

int64_t RingTransitionKVCache::bytes() const { return plain_.bytes() + quantized_->bytes(); }

std::unique_ptr<AttentionRead> RingTransitionKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  if (converted_) return quantized_->append(k, v, phase);
  TERN_CHECK(k.device().is_cpu(), "[kv-cache] affine storage is not implemented on CUDA yet");
  std::unique_ptr<AttentionRead> read = plain_.append(k, v, phase);
  if (!in_spec_round()) convert_if_due();
  return read;
}

void RingTransitionKVCache::convert_if_due() {
  if (converted_ || plain_.offset() < start_ || plain_.offset() == 0) return;
  // The read keeps its own copies or views; the cache lets the plain ring go.
  quantized_->adopt(plain_.temporal_keys(), plain_.temporal_values(), plain_.offset());
  transition_ = plain_.offset();
  plain_ = RingKVCache(plain_.window());
  converted_ = true;
}

}  // namespace tern
