// RingTransitionKVCache: delegation to the plain or the affine ring, and the one-way conversion.
#include "tern/state/ring_transition_kv_cache.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"
#include "tern/state/cache_file.h"

namespace tern {
namespace {
// The record kind: the start and the storage converted into (a file from another scheme is refused).
std::string transition_kind(int64_t start, const AffineRingKVCache& q) {
  return "bf16-first ring to " + q.signature() + " at " + std::to_string(start);
}

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

void RingTransitionKVCache::save(CacheWriter& out) const {
  out.put_string("kind", transition_kind(start_, *quantized_));
  out.put_int("converted", converted_ ? 1 : 0);
  out.put_int("transition", transition_);
  out.set_prefix("inner.");
  if (converted_)
    quantized_->save(out);
  else
    plain_.save(out);
  out.set_prefix("");
}

void RingTransitionKVCache::load(CacheReader& in) {
  TERN_CHECK(!converted_ && plain_.offset() == 0, "[prompt-cache] expected a fresh ring transition cache to load into");
  in.expect("kind", transition_kind(start_, *quantized_));
  const int64_t converted = in.get_int("converted"), transition = in.get_int("transition");
  if ((converted != 0 && converted != 1) || transition < 0)
    in.fail(fmt::format("expected converted 0/1 and a transition >= 0, got {} and {}", converted, transition));
  in.set_prefix("inner.");
  if (converted == 1)
    quantized_->load(in);
  else
    plain_.load(in);
  in.set_prefix("");
  converted_ = converted == 1;
  transition_ = transition;
}

}  // namespace tern
