// TransitionKVCache: delegation to the plain or the quantized storage, and the one-way conversion.
#include "tern/state/transition_kv_cache.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"
#include "tern/state/cache_file.h"

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

Tensor TransitionKVCache::next_positions(int64_t n) const {
  return converted_ ? quantized_->next_positions(n) : plain_.next_positions(n);
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

void TransitionKVCache::reserve(int64_t positions) {
  TERN_CHECK(converted_, "[kv_cache] storage {} does not support compiled decode before its transition", signature());
  quantized_->reserve(positions);
}

void TransitionKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || converted_, "[kv_cache] storage {} does not support compiled decode before its transition",
             signature());
  if (converted_) quantized_->attach_step(step);
}

void TransitionKVCache::advance(int64_t n) {
  TERN_CHECK(converted_, "[kv_cache] storage {} does not support compiled decode before its transition", signature());
  quantized_->advance(n);
}

std::unique_ptr<AttentionRead> TransitionKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  if (converted_) return quantized_->append(k, v, phase);
  std::unique_ptr<AttentionRead> read = plain_.append(k, v, phase);
  if (!in_spec_round()) convert_if_due();
  return read;
}

void TransitionKVCache::convert_if_due() {
  if (converted_ || plain_.offset() < start_ || plain_.offset() == 0) return;
  // The read keeps views of the plain buffers alive; the cache itself lets them go.
  quantized_->store(plain_.keys(), plain_.values());
  transition_ = plain_.offset();
  plain_ = PlainKVCache();
  converted_ = true;
}

namespace {
std::string transition_kind(int64_t start, const QuantizedKVCache& q) {
  return "bf16-first to " + q.signature() + " at " + std::to_string(start);
}
}  // namespace

void TransitionKVCache::save(CacheWriter& out) const {
  out.put_string("kind", transition_kind(start_, *quantized_));
  out.put_int("converted", converted_ ? 1 : 0);
  out.put_int("transition", transition_);
  out.set_prefix("inner.");
  if (converted_) quantized_->save(out);
  else plain_.save(out);
  out.set_prefix("");
}

void TransitionKVCache::load(CacheReader& in) {
  TERN_CHECK(!converted_ && plain_.offset() == 0, "[prompt-cache] expected a fresh transition cache to load into");
  in.expect("kind", transition_kind(start_, *quantized_));
  const int64_t converted = in.get_int("converted"), transition = in.get_int("transition");
  if ((converted != 0 && converted != 1) || transition < 0)
    in.fail(fmt::format("expected converted 0/1 and a transition >= 0, got {} and {}", converted, transition));
  in.set_prefix("inner.");
  if (converted == 1) quantized_->load(in);
  else plain_.load(in);
  in.set_prefix("");
  converted_ = converted == 1;
  transition_ = transition;
}

}  // namespace tern
