// TransitionBase: delegation to the held storage, the one-way switch and its persistence.
#include "tern/state/transition_base.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"
#include "tern/state/cache_file.h"

namespace tern {

TransitionBase::TransitionBase(int64_t start) : start_(start) {
  TERN_CHECK(start >= 0, "[kv-cache] expected a non-negative start, got {}", start);
}

int64_t TransitionBase::minimum_reusable_offset() const {
  return converted_ ? std::min(transition_, quantized_storage().offset()) : 0;
}

int64_t TransitionBase::max_append_tokens() const {
  const int64_t offset = plain_storage().offset();
  // Converted, or empty with start 0: the first append is read unquantized whatever its length.
  if (converted_ || (start_ == 0 && offset == 0)) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(start_ - offset, 1);
}

std::unique_ptr<AttentionRead> TransitionBase::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  if (converted_) return quantized_storage().append(k, v, phase);
  std::unique_ptr<AttentionRead> read = plain_storage().append(k, v, phase);
  if (!in_spec_round()) convert_if_due();
  return read;
}

void TransitionBase::reserve(int64_t positions) {
  TERN_CHECK(converted_, "[kv-cache] storage {} does not support compiled decode before its transition", signature());
  quantized_storage().reserve(positions);
}

void TransitionBase::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || converted_, "[kv-cache] storage {} does not support compiled decode before its transition",
             signature());
  if (converted_) quantized_storage().attach_step(step);
}

void TransitionBase::advance(int64_t n) {
  TERN_CHECK(converted_, "[kv-cache] storage {} does not support compiled decode before its transition", signature());
  quantized_storage().advance(n);
}

void TransitionBase::convert_if_due() {
  const int64_t held = plain_storage().offset();
  if (converted_ || held < start_ || held == 0) return;
  // The read keeps its own views or copies; the cache lets the plain storage go.
  convert();
  transition_ = held;
  converted_ = true;
}

namespace {
// The record kind: the start and the storage converted into (a file from another scheme is refused).
std::string transition_kind(int64_t start, const KVCache& q) {
  return "bf16-first to " + q.signature() + " at " + std::to_string(start);
}
}  // namespace

void TransitionBase::save(CacheWriter& out) const {
  out.put_string("kind", transition_kind(start_, quantized_storage()));
  out.put_int("converted", converted_ ? 1 : 0);
  out.put_int("transition", transition_);
  out.set_prefix("inner.");
  held().save(out);
  out.set_prefix("");
}

void TransitionBase::load(CacheReader& in) {
  TERN_CHECK(!converted_ && plain_storage().offset() == 0, "[prompt-cache] expected a fresh transition cache to load into");
  in.expect("kind", transition_kind(start_, quantized_storage()));
  const int64_t converted = in.get_int("converted"), transition = in.get_int("transition");
  if ((converted != 0 && converted != 1) || transition < 0)
    in.fail(fmt::format("expected converted 0/1 and a transition >= 0, got {} and {}", converted, transition));
  in.set_prefix("inner.");
  if (converted == 1) quantized_storage().load(in);
  else plain_storage().load(in);
  in.set_prefix("");
  converted_ = converted == 1;
  transition_ = transition;
}

}  // namespace tern
