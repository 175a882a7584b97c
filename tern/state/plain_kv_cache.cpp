// PlainKVCache: growth in kStep steps, trimming, and its attention read (causal with the query offset).
#include "tern/state/plain_kv_cache.h"

#include "tern/ops/index.h"
#include "tern/ops/norm_rope.h"
#include "tern/state/cache_file.h"

namespace tern {
std::string PlainKVCache::signature() const {
  std::string dt = keys_.defined() ? dtype_name(keys_.dtype()) : "bf16";
  return window_ > 0 ? "kv:" + dt + ":window:" + std::to_string(window_) : "kv:" + dt;
}

Tensor PlainKVCache::next_positions(int64_t n) const {
  if (step_) return step_->positions.view({step_->positions.size(0), 1});
  return uniform_positions(offset_, n);
}

int64_t PlainKVCache::trim(int64_t n) {
  TERN_CHECK(!step_, "[kv-cache] expected no trim while a compiled decode step is attached");
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  int64_t t = std::min(n, offset_);
  offset_ -= t;
  return t;
}

int64_t PlainKVCache::bytes() const {
  return (keys_.defined() ? keys_.nbytes() : 0) + (values_.defined() ? values_.nbytes() : 0);
}

Tensor PlainKVCache::keys() const { return keys_.slice(2, 0, offset_); }
Tensor PlainKVCache::values() const { return values_.slice(2, 0, offset_); }

void PlainKVCache::reserve(const Tensor& k, const Tensor& v, int64_t needed) {
  if (keys_.defined() && needed <= capacity()) return;
  int64_t cap = (needed + kStep - 1) / kStep * kStep;
  Tensor nk = Tensor::empty({k.size(0), k.size(1), cap, k.size(3)}, k.dtype(), k.device());
  Tensor nv = Tensor::empty({v.size(0), v.size(1), cap, v.size(3)}, v.dtype(), v.device());
  if (offset_ > 0) {
    Tensor dk = nk.slice(2, 0, offset_), dv = nv.slice(2, 0, offset_);
    dk.copy_from(keys());
    dv.copy_from(values());
  }
  keys_ = nk;
  values_ = nv;
}

void PlainKVCache::reserve(int64_t positions) {
  TERN_CHECK(keys_.defined(), "[kv-cache] expected an append before reserve() (it fixes the shapes)");
  TERN_CHECK(!step_, "[kv-cache] expected reserve() before a compiled decode step is attached");
  Tensor k = keys_.slice(2, 0, 1), v = values_.slice(2, 0, 1);
  reserve(k, v, positions);
}

void PlainKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || supports_device_step(), "[kv-cache] storage {} does not support compiled decode", signature());
  TERN_CHECK(!step || (keys_.defined() && step->span <= capacity() && step->positions.device() == keys_.device()),
             "[kv-cache] expected a compiled step span within the reserved {} positions on {}, got {}", capacity(),
             keys_.defined() ? keys_.device().str() : "no storage", step ? step->span : 0);
  step_ = step;
}

void PlainKVCache::advance(int64_t n) {
  TERN_CHECK(n >= 0 && offset_ + n <= capacity(), "[kv-cache] expected to advance within {} positions, got {} + {}",
             capacity(), offset_, n);
  offset_ += n;
}

std::unique_ptr<AttentionRead> PlainKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  check_kv_append(k, v, phase, keys_, values_);
  if (step_) {
    TERN_CHECK(phase == AppendPhase::decode && step_->span <= capacity(),
               "[kv-cache] expected decode appends within the reserved {} positions while a compiled step is attached",
               capacity());
    ops::write_positions(keys_, k, values_, v, step_->positions);
    return step_read(keys_, values_, *step_, true);
  }
  const int64_t n = k.size(2), start = offset_;
  reserve(k, v, start + n);
  Tensor dk = keys_.slice(2, start, start + n), dv = values_.slice(2, start, start + n);
  dk.copy_from(k);
  dv.copy_from(v);
  offset_ = start + n;
  return causal_read(keys(), values(), start, window_);
}

KVCache::RopedRead PlainKVCache::append_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const QKNormRope& n, AppendPhase phase) {
  if (!step_) return KVCache::append_norm_rope(q, k, v, n, phase);
  TERN_CHECK(n.rope, "[kv-cache] expected a rope table for append_norm_rope");
  TERN_CHECK(phase == AppendPhase::decode && q.size(2) == 1,
             "[kv-cache] expected decode appends while a compiled step is attached, got {} positions", q.size(2));
  return {q, step_read_norm_rope(keys_, values_, *step_, k, v, n)};
}

void PlainKVCache::save(CacheWriter& out) const {
  out.put_string("kind", "plain");
  out.put_int("window", window_);
  out.put_int("offset", offset_);
  if (offset_ > 0) {
    out.put_tensor("keys", keys());
    out.put_tensor("values", values());
  }
}

void PlainKVCache::load(CacheReader& in) {
  in.expect("kind", "plain");
  in.expect("window", window_);
  const int64_t n = in.get_int("offset");
  keys_ = values_ = Tensor();
  offset_ = 0;
  if (n <= 0) return;
  Tensor k = in.get_tensor("keys"), v = in.get_tensor("values");
  in.expect_activations("keys", k.dtype());
  if (k.rank() != 4 || v.rank() != 4 || k.size(2) != n || v.size(2) != n || k.size(0) != v.size(0) ||
      k.size(1) != v.size(1) || k.dtype() != v.dtype())
    in.fail(fmt::format("expected keys and values [B, Hkv, {}, D], got {} and {}", n, shape_str(k.shape()),
                        shape_str(v.shape())));
  keys_ = k;
  values_ = v;
  offset_ = n;
}

}  // namespace tern
