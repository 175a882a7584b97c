// AffineRingKVCache: slot arithmetic of the wrapped ring of packed rows, its read (fused decode
// attention, or the decoded window under the sliding mask), trim before the first wrap, taking over a
// plain ring's contents at the bf16-first transition, and persistence of the packed rows.
#include "tern/state/affine_ring_kv_cache.h"

#include <array>

#include "tern/base/error.h"
#include "tern/ops/index.h"
#include "tern/state/cache_file.h"
#include "tern/state/packed_read.h"

namespace tern {
AffineRingKVCache::AffineRingKVCache(int64_t window, int bits, int64_t group) : window_(window) {
  TERN_CHECK(window > 0, "[kv-cache] expected a ring window > 0, got {}", window);
  TERN_CHECK(bits == 4 || bits == 8, "[kv-cache] expected affine bits of 4 or 8, got {}", bits);
  TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-cache] expected a group of 32, 64 or 128, got {}", group);
  key_ = value_ = ops::KVRowCodec{ops::KVRowCodec::affine, bits, group, 0};
}

std::string AffineRingKVCache::signature() const {
  return "kv:ring:" + std::to_string(window_) + ":affine:" + std::to_string(key_.bits) + ":" +
         std::to_string(key_.group);
}

Tensor AffineRingKVCache::next_positions(int64_t n) const {
  if (step_) return step_->positions.view({step_->positions.size(0), 1});
  return uniform_positions(offset_, n);
}

int64_t AffineRingKVCache::trim(int64_t n) {
  TERN_CHECK(!step_, "[kv-cache] expected no trim while a compiled decode step is attached");
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  TERN_CHECK(is_trimmable(),
             "[kv-cache] expected a trim before the ring wraps, got a ring of window {} that has wrapped (offset {}): "
             "positions before {} are gone",
             window_, offset_, offset_ - window_);
  const int64_t t = std::min(n, offset_);
  offset_ -= t;  // not wrapped: position p sits in slot p, so the slots past offset are simply free
  return t;
}

int64_t AffineRingKVCache::bytes() const {
  return (keys_.defined() ? keys_.nbytes() : 0) + (values_.defined() ? values_.nbytes() : 0);
}

void AffineRingKVCache::check_append(const Tensor& k, const Tensor& v) const {
  TERN_CHECK(k.device() == v.device(), "[kv-cache] expected k and v on one device, got {} and {}", k.device().str(),
             v.device().str());
  TERN_CHECK(!keys_.defined() || k.device() == keys_.device(),
             "[kv-cache] expected appends on the affine ring's device ({}), got {}", keys_.device().str(),
             k.device().str());
  TERN_CHECK(k.rank() == 4 && v.rank() == 4, "[kv-cache] expected k and v of rank 4 [B, Hkv, L, D], got {} and {}",
             shape_str(k.shape()), shape_str(v.shape()));
  TERN_CHECK(k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2),
             "[kv-cache] expected k and v to agree on [B, Hkv, L], got {} and {}", shape_str(k.shape()),
             shape_str(v.shape()));
  if (batch_ > 0) {
    TERN_CHECK(k.size(0) == batch_ && k.size(1) == heads_ && k.size(3) == key_.dim && v.size(3) == value_.dim,
               "[kv-cache] expected appends of [{}, {}, L, {}] / [.., {}], got {} and {}", batch_, heads_, key_.dim,
               value_.dim, shape_str(k.shape()), shape_str(v.shape()));
  }
}

void AffineRingKVCache::ensure_configured(const Tensor& k, const Tensor& v) {
  if (batch_ > 0) return;
  for (int64_t d : {k.size(3), v.size(3)})
    TERN_CHECK(d % key_.group == 0 && d <= 1024,
               "[kv-cache] affine storage expects head_dim a multiple of the group {} (at most 1024), got {}",
               key_.group, d);
  key_.dim = k.size(3);
  value_.dim = v.size(3);
  batch_ = k.size(0);
  heads_ = k.size(1);
}

void AffineRingKVCache::grow(int64_t needed, const Device& device) {
  const int64_t cap = keys_.defined() ? keys_.size(0) : 0;
  if (keys_.defined() && needed <= cap) return;
  // Not wrapped yet (cap < window), so positions [0, offset) sit in slots [0, offset).
  const int64_t grown = std::min(window_, std::max(needed, 2 * cap));
  for (bool keys : {true, false}) {
    Tensor& ring = keys ? keys_ : values_;
    Tensor bigger = Tensor::empty({grown, batch_, heads_, (keys ? key_ : value_).row_bytes()}, Dtype::u8, device);
    if (offset_ > 0) {
      Tensor held = bigger.slice(0, 0, offset_);
      held.copy_from(ring.slice(0, 0, offset_));
    }
    ring = std::move(bigger);
  }
}

Tensor AffineRingKVCache::rows_at(const Tensor& ring, int64_t first, int64_t n) const {
  TERN_ASSERT(n >= 0 && n <= stored() && first >= offset_ - stored() && first + n <= offset_,
              "[kv-cache] ring rows [{}, {}) with [{}, {}) held", first, first + n, offset_ - stored(), offset_);
  if (n == 0) return ring.slice(0, 0, 0);
  const int64_t s = first % window_;
  if (s + n <= ring.size(0)) return ring.slice(0, s, s + n);
  // Wrapped (the ring holds the whole window): the tail of the ring, then its head.
  return ops::concat({ring.slice(0, s, window_), ring.slice(0, 0, n - (window_ - s))}, 0);
}

void AffineRingKVCache::put_rows(Tensor& ring, const Tensor& rows, int64_t first) const {
  const int64_t n = rows.size(0), s = first % window_, head = std::min(n, window_ - s);
  TERN_ASSERT(n <= window_ && s + head <= ring.size(0), "[kv-cache] ring write of {} positions at slot {} of {}", n, s,
              ring.size(0));
  Tensor tail_slots = ring.slice(0, s, s + head);
  tail_slots.copy_from(rows.slice(0, 0, head));
  if (head < n) {
    Tensor head_slots = ring.slice(0, 0, n - head);
    head_slots.copy_from(rows.slice(0, head, n));
  }
}

void AffineRingKVCache::encode_at(const Tensor& k, const Tensor& v, int64_t first) {
  const int64_t n = k.size(2), s = first % window_, head = std::min(n, window_ - s);
  TERN_ASSERT(n <= window_ && s + head <= keys_.size(0), "[kv-cache] ring write of {} positions at slot {} of {}", n, s,
              keys_.size(0));
  // At most two runs of slots: [s, s + head) and, once it wraps, [0, n - head).
  for (auto [from, slot, len] : {std::array<int64_t, 3>{0, s, head}, std::array<int64_t, 3>{head, 0, n - head}}) {
    if (len == 0) continue;
    Tensor kd = keys_.slice(0, slot, slot + len), vd = values_.slice(0, slot, slot + len);
    ops::kv_encode(k.slice(2, from, from + len), key_, kd);
    ops::kv_encode(v.slice(2, from, from + len), value_, vd);
  }
}

Tensor AffineRingKVCache::temporal_keys() const {
  if (!keys_.defined()) return Tensor::empty({batch_, heads_, 0, key_.dim}, Dtype::f32);
  return ops::kv_decode(rows_at(keys_, offset_ - stored(), stored()), key_, Dtype::f32);
}

Tensor AffineRingKVCache::temporal_values() const {
  if (!values_.defined()) return Tensor::empty({batch_, heads_, 0, value_.dim}, Dtype::f32);
  return ops::kv_decode(rows_at(values_, offset_ - stored(), stored()), value_, Dtype::f32);
}

void AffineRingKVCache::adopt(const Tensor& k, const Tensor& v, int64_t offset) {
  TERN_CHECK(offset_ == 0 && batch_ == 0, "[kv-cache] expected an empty affine ring to adopt into, got offset {}",
             offset_);
  check_append(k, v);
  const int64_t n = k.size(2);
  TERN_CHECK(n <= window_ && n <= offset && (n == window_ || n == offset),
             "[kv-cache] expected the last min(offset, window) = {} positions of a ring, got {}",
             std::min(offset, window_), n);
  ensure_configured(k, v);
  grow(n, k.device());  // before the wrap positions [0, n) take slots [0, n); after it, the whole window
  offset_ = offset;
  if (n > 0) encode_at(k, v, offset - n);
}

bool AffineRingKVCache::supports_device_step() const {
  return !keys_.defined() || (ops::kv_ring_steps_supported(keys_.device()) &&
                              ops::kv_decode_attention_supported(key_, value_, keys_.device()));
}

void AffineRingKVCache::reserve(int64_t positions) {
  TERN_CHECK(batch_ > 0 && keys_.defined(), "[kv-cache] expected an append before reserve() (it fixes the shapes)");
  TERN_CHECK(!step_, "[kv-cache] expected reserve() before a compiled decode step is attached");
  grow(std::min(positions, window_), keys_.device());
}

void AffineRingKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || supports_device_step(), "[kv-cache] storage {} does not support compiled decode (head dims {} / {})",
             signature(), key_.dim, value_.dim);
  TERN_CHECK(!step || (keys_.defined() && step->positions.device() == keys_.device() &&
                       step->positions.dtype() == Dtype::i32 && step->positions.numel() == batch_),
             "[kv-cache] expected a compiled step with positions [{}] i32 on the affine ring's device ({})", batch_,
             keys_.defined() ? keys_.device().str() : "no storage");
  TERN_CHECK(!step || !in_spec_round(), "[kv-cache] expected no speculative round when a compiled step is attached");
  step_ = step;
}

void AffineRingKVCache::advance(int64_t n) {
  TERN_CHECK(n >= 0, "[kv-cache] expected to advance by n >= 0 positions, got {}", n);
  offset_ += n;
}

std::unique_ptr<AttentionRead> AffineRingKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  check_append(k, v);
  TERN_CHECK(phase == AppendPhase::window || k.size(2) == 1,
             "[kv-cache] expected one position for a decode append, got {}", k.size(2));
  if (step_) {
    TERN_CHECK(phase == AppendPhase::decode && !in_spec_round(),
               "[kv-cache] expected decode appends outside speculative rounds while a compiled step is attached");
    // Row b goes to slot positions[b] % window; the read skips that slot (ops::kv_decode_attention's ring),
    // so whether it already holds the new row or still the oldest one does not matter.
    ops::kv_encode_positions(k, key_, keys_, v, value_, values_, step_->positions, window_);
    return packed_decode_read(keys_, values_, key_, value_, k, v, step_->positions, window_);
  }
  ensure_configured(k, v);
  const int64_t n = k.size(2);
  grow(std::min(offset_ + n, window_), k.device());
  // The read: the last window-1 stored positions (all a new query can still see), then the new ones as
  // given. The read views those rows, unless the
  // store below overwrites some of them (a window that wraps onto them): then it reads a copy.
  const int64_t prev = std::min(offset_, window_ - 1);
  Tensor k_rows = rows_at(keys_, offset_ - prev, prev), v_rows = rows_at(values_, offset_ - prev, prev);
  if (n > 1 && offset_ + n > window_) k_rows = k_rows.clone(), v_rows = v_rows.clone();
  std::unique_ptr<AttentionRead> read =
      packed_read(std::move(k_rows), std::move(v_rows), key_, value_, k, v, phase, window_);

  const int64_t keep = std::min(n, window_);
  if (in_spec_round()) save_overwritten(n);
  offset_ += n;
  encode_at(k.slice(2, n - keep, n), v.slice(2, n - keep, n), offset_ - keep);
  return read;
}

void AffineRingKVCache::spec_round_begin() {
  TERN_CHECK(!step_, "[kv-cache] expected no speculative round while a compiled decode step is attached");
  KVCache::spec_round_begin();
  round_.begin(offset_);
}

void AffineRingKVCache::spec_round_commit() {
  KVCache::spec_round_commit();
  round_.clear();
}

void AffineRingKVCache::save_overwritten(int64_t n) {
  round_.save(spec_round_start(), offset_, n, [&](int64_t first, int64_t count) {
    return std::pair{rows_at(keys_, first, count).clone(), rows_at(values_, first, count).clone()};
  });
}

int64_t AffineRingKVCache::spec_round_rollback(int64_t keep) {
  const int64_t drafted = check_spec_rollback(keep);
  offset_ = round_.rollback(spec_round_start(), drafted, keep,
                            [&](const Tensor& k, const Tensor& v, int64_t first) {
                              put_rows(keys_, k, first);
                              put_rows(values_, v, first);
                            });
  end_spec_round();
  return 0;
}

void AffineRingKVCache::save(CacheWriter& out) const {
  out.put_string("kind", "affine_ring");
  out.put_string("signature", signature());
  put_row_layout(out, {offset_, batch_ > 0, batch_, heads_, key_.dim, value_.dim});
  if (stored() == 0) return;
  out.put_tensor("keys", rows_at(keys_, offset_ - stored(), stored()));
  out.put_tensor("values", rows_at(values_, offset_ - stored(), stored()));
}

void AffineRingKVCache::load(CacheReader& in) {
  TERN_CHECK(batch_ == 0 && offset_ == 0, "[prompt-cache] expected a fresh affine ring to load into");
  in.expect("kind", "affine_ring");
  in.expect("signature", signature());
  const PackedRowLayout l = get_row_layout(in);
  if (!l.configured) return;
  const int64_t n = l.offset, batch = l.batch, heads = l.heads, key_dim = l.key_dim, value_dim = l.value_dim;
  if (key_dim % key_.group != 0 || value_dim % key_.group != 0)
    in.fail(fmt::format("expected head dims multiples of the group {}, got {} / {}", key_.group, key_dim, value_dim));
  const int64_t held = std::min(n, window_);
  ops::KVRowCodec kc = key_, vc = value_;
  kc.dim = key_dim;
  vc.dim = value_dim;
  Tensor k, v;
  if (held > 0) {
    k = in.get_tensor("keys");
    v = in.get_tensor("values");
    auto check = [&](const char* what, const Tensor& rows, const ops::KVRowCodec& c) {
      if (rows.dtype() != Dtype::u8 || rows.shape() != Shape{held, batch, heads, c.row_bytes()})
        in.fail(fmt::format("expected packed {} u8 [{}, {}, {}, {}], got {} {}", what, held, batch, heads,
                            c.row_bytes(), dtype_name(rows.dtype()), shape_str(rows.shape())));
    };
    check("keys", k, kc);
    check("values", v, vc);
  }
  key_ = kc;
  value_ = vc;
  batch_ = batch;
  heads_ = heads;
  grow(held, in.device());  // slot p % window for position p, as appends leave it
  offset_ = n;
  if (held == 0) return;
  put_rows(keys_, k, n - held);
  put_rows(values_, v, n - held);
}

}  // namespace tern
