// RingKVCache: growth up to the window, slot arithmetic of the wrapped buffer, trimming before the
// first wrap, its attention read over [last window-1 stored ; new positions], and compiled-decode steps.
#include "tern/state/ring_kv_cache.h"

#include <algorithm>

#include "tern/ops/index.h"
#include "tern/state/cache_file.h"

namespace tern {
RingKVCache::RingKVCache(int64_t window) : window_(window) {
  TERN_CHECK(window > 0, "[kv-cache] expected a ring window > 0, got {}", window);
}

std::string RingKVCache::signature() const {
  std::string dt = keys_.defined() ? dtype_name(keys_.dtype()) : "bf16";
  return "kv:" + dt + ":ring:" + std::to_string(window_);
}

Tensor RingKVCache::next_positions(int64_t n) const {
  if (step_) return step_->positions.view({step_->positions.size(0), 1});
  return uniform_positions(offset_, n);
}

int64_t RingKVCache::trim(int64_t n) {
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  TERN_CHECK(!step_, "[kv-cache] expected no trim while a compiled decode step is attached");
  TERN_CHECK(is_trimmable(),
             "[kv-cache] expected a trim before the ring wraps, got a ring of window {} that has wrapped (offset {}): "
             "positions before {} are gone",
             window_, offset_, offset_ - window_);
  int64_t t = std::min(n, offset_);
  offset_ -= t;
  return t;
}

int64_t RingKVCache::bytes() const {
  return (keys_.defined() ? keys_.nbytes() : 0) + (values_.defined() ? values_.nbytes() : 0);
}

Tensor RingKVCache::temporal(const Tensor& buf, int64_t n) const {
  TERN_ASSERT(n >= 0 && n <= stored(), "[kv-cache] ring view of {} positions with {} stored", n, stored());
  if (n == 0) return buf.defined() ? buf.slice(2, 0, 0) : Tensor();
  const int64_t s = (offset_ - n) % window_;
  if (s + n <= capacity()) return buf.slice(2, s, s + n);
  // Wrapped (capacity == window): the tail of the buffer, then its head.
  return ops::concat({buf.slice(2, s, window_), buf.slice(2, 0, n - (window_ - s))}, 2);
}

void RingKVCache::grow(const Tensor& k, const Tensor& v, int64_t needed) {
  if (keys_.defined() && needed <= capacity()) return;
  // Not wrapped yet (capacity < window), so positions [0, offset) sit in slots [0, offset).
  const int64_t cap = std::min(window_, std::max(needed, 2 * capacity()));
  Tensor nk = Tensor::empty({k.size(0), k.size(1), cap, k.size(3)}, k.dtype(), k.device());
  Tensor nv = Tensor::empty({v.size(0), v.size(1), cap, v.size(3)}, v.dtype(), v.device());
  if (offset_ > 0) {
    Tensor dk = nk.slice(2, 0, offset_), dv = nv.slice(2, 0, offset_);
    dk.copy_from(keys_.slice(2, 0, offset_));
    dv.copy_from(values_.slice(2, 0, offset_));
  }
  keys_ = nk;
  values_ = nv;
}

void RingKVCache::write(Tensor& buf, const Tensor& src, int64_t first_position) const {
  const int64_t n = src.size(2);
  TERN_ASSERT(n <= window_, "[kv-cache] ring write of {} positions into a window of {}", n, window_);
  const int64_t s = first_position % window_;
  const int64_t first = std::min(n, window_ - s);
  Tensor d0 = buf.slice(2, s, s + first);
  d0.copy_from(src.slice(2, 0, first));
  if (first < n) {
    Tensor d1 = buf.slice(2, 0, n - first);
    d1.copy_from(src.slice(2, first, n));
  }
}

std::unique_ptr<AttentionRead> RingKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  check_kv_append(k, v, phase, keys_, values_);
  if (step_) {
    TERN_CHECK(phase == AppendPhase::decode && !in_spec_round(),
               "[kv-cache] expected decode appends outside speculative rounds while a compiled step is attached");
    ops::write_positions(keys_, k, values_, v, step_->positions, window_);
    // Lengths past the slots held mean every slot (a wrapped ring holds exactly the window).
    return step_read(keys_, values_, DeviceStep{step_->positions, step_->lengths, capacity()}, false);
  }
  const int64_t n = k.size(2);
  // The read: the last window-1 stored positions (all a new query can still see) and the new ones.
  const int64_t prev = std::min(offset_, window_ - 1);
  Tensor rk = k, rv = v;
  if (prev > 0) {
    rk = ops::concat({temporal(keys_, prev), k}, 2);
    rv = ops::concat({temporal(values_, prev), v}, 2);
  }
  auto read = causal_read(rk, rv, prev, window_);

  const int64_t keep = std::min(n, window_);
  if (in_spec_round()) save_overwritten(n);
  grow(k, v, std::min(offset_ + n, window_));
  offset_ += n;
  write(keys_, k.slice(2, n - keep, n), offset_ - keep);
  write(values_, v.slice(2, n - keep, n), offset_ - keep);
  return read;
}

void RingKVCache::reserve(int64_t positions) {
  TERN_CHECK(keys_.defined(), "[kv-cache] expected an append before reserve() (it fixes the shapes)");
  TERN_CHECK(!step_, "[kv-cache] expected reserve() before a compiled decode step is attached");
  grow(keys_.slice(2, 0, 1), values_.slice(2, 0, 1), std::min(positions, window_));
}

void RingKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || (keys_.defined() && step->positions.device() == keys_.device()),
             "[kv-cache] expected a compiled step on the ring's device ({}), got {}",
             keys_.defined() ? keys_.device().str() : "no storage", step ? step->positions.device().str() : "");
  TERN_CHECK(!step || !in_spec_round(), "[kv-cache] expected no speculative round when a compiled step is attached");
  step_ = step;
}

void RingKVCache::advance(int64_t n) {
  TERN_CHECK(n >= 0, "[kv-cache] expected to advance by n >= 0 positions, got {}", n);
  offset_ += n;
}

void RingKVCache::spec_round_begin() {
  TERN_CHECK(!step_, "[kv-cache] expected no speculative round while a compiled decode step is attached");
  KVCache::spec_round_begin();
  round_.begin(offset_);
}

void RingKVCache::spec_round_commit() {
  KVCache::spec_round_commit();
  round_.clear();
}

void RingKVCache::save_overwritten(int64_t n) {
  round_.save(spec_round_start(), offset_, n, [&](int64_t first, int64_t count) {
    // copies: the ring slots are about to be overwritten
    auto copy_out = [&](const Tensor& buf) { return temporal(buf, offset_ - first).slice(2, 0, count).clone(); };
    return std::pair{copy_out(keys_), copy_out(values_)};
  });
}

int64_t RingKVCache::spec_round_rollback(int64_t keep) {
  const int64_t drafted = check_spec_rollback(keep);
  offset_ = round_.rollback(spec_round_start(), drafted, keep,
                            [&](const Tensor& k, const Tensor& v, int64_t first) {
                              write(keys_, k, first);
                              write(values_, v, first);
                            });
  end_spec_round();
  return 0;
}

void RingKVCache::save(CacheWriter& out) const {
  out.put_string("kind", "ring");
  out.put_int("window", window_);
  out.put_int("offset", offset_);
  if (stored() > 0) {
    out.put_tensor("keys", temporal_keys());
    out.put_tensor("values", temporal_values());
  }
}

void RingKVCache::load(CacheReader& in) {
  in.expect("kind", "ring");
  in.expect("window", window_);
  const int64_t n = in.get_int("offset");
  keys_ = values_ = Tensor();
  offset_ = 0;
  if (n <= 0) return;
  const int64_t held = std::min(n, window_);
  Tensor k = in.get_tensor("keys"), v = in.get_tensor("values");
  in.expect_activations("keys", k.dtype());
  if (k.rank() != 4 || v.rank() != 4 || k.size(2) != held || v.size(2) != held || k.size(0) != v.size(0) ||
      k.size(1) != v.size(1) || k.dtype() != v.dtype())
    in.fail(fmt::format("expected keys and values [B, Hkv, {}, D], got {} and {}", held, shape_str(k.shape()),
                        shape_str(v.shape())));
  // Slot p % window for position p, as appends leave it: the whole window once wrapped, else [0, n).
  const int64_t cap = n >= window_ ? window_ : n;
  keys_ = Tensor::empty({k.size(0), k.size(1), cap, k.size(3)}, k.dtype(), k.device());
  values_ = Tensor::empty({v.size(0), v.size(1), cap, v.size(3)}, v.dtype(), v.device());
  offset_ = n;
  write(keys_, k, offset_ - k.size(2));
  write(values_, v, offset_ - v.size(2));
}

}  // namespace tern
