// AffineRingKVCache: slot arithmetic of the wrapped byte ring, the decode-then-attend ring read, trim
// before the first wrap, and taking over a plain ring's contents at the bf16-first transition.
#include "tern/state/affine_ring_kv_cache.h"

#include "tern/base/error.h"
#include "tern/base/parallel.h"
#include "tern/ops/elementwise.h"
#include "tern/state/ring_kv_cache.h"

namespace tern {
namespace {
Tensor as_f32(const Tensor& x) { return (x.dtype() == Dtype::f32 ? x : ops::cast(x, Dtype::f32)).contiguous(); }
}  // namespace

AffineRingKVCache::AffineRingKVCache(int64_t window, int bits, int64_t group) : window_(window) {
  TERN_CHECK(window > 0, "[kv-cache] expected a ring window > 0, got {}", window);
  TERN_CHECK(bits == 4 || bits == 8, "[kv-cache] expected affine bits of 4 or 8, got {}", bits);
  TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-cache] expected a group of 32, 64 or 128, got {}", group);
  key_.bits = value_.bits = bits;
  key_.group = value_.group = group;
}

std::string AffineRingKVCache::signature() const {
  return "kv:ring:" + std::to_string(window_) + ":affine:" + std::to_string(key_.bits) + ":" +
         std::to_string(key_.group);
}

Tensor AffineRingKVCache::next_positions(int64_t n) const { return uniform_positions(offset_, n); }

int64_t AffineRingKVCache::trim(int64_t n) {
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  TERN_CHECK(is_trimmable(),
             "[kv-cache] expected a trim before the ring wraps, got a ring of window {} that has wrapped (offset {}): "
             "positions before {} are gone",
             window_, offset_, offset_ - window_);
  const int64_t t = std::min(n, offset_);
  offset_ -= t;  // not wrapped: position p sits in slot p, so the slots past offset are simply dropped
  keys_.resize(static_cast<size_t>(offset_ * rows_ * key_.row_bytes()));
  values_.resize(static_cast<size_t>(offset_ * rows_ * value_.row_bytes()));
  return t;
}

void AffineRingKVCache::check_append(const Tensor& k, const Tensor& v) const {
  TERN_CHECK(k.device().is_cpu() && v.device().is_cpu(), "[kv-cache] affine storage is not implemented on CUDA yet");
  TERN_CHECK(k.rank() == 4 && v.rank() == 4, "[kv-cache] expected k and v of rank 4 [B, Hkv, L, D], got {} and {}",
             shape_str(k.shape()), shape_str(v.shape()));
  TERN_CHECK(k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2),
             "[kv-cache] expected k and v to agree on [B, Hkv, L], got {} and {}", shape_str(k.shape()),
             shape_str(v.shape()));
  if (rows_ > 0) {
    TERN_CHECK(k.size(0) == batch_ && k.size(1) == heads_ && k.size(3) == key_.dim && v.size(3) == value_.dim,
               "[kv-cache] expected appends of [{}, {}, L, {}] / [.., {}], got {} and {}", batch_, heads_, key_.dim,
               value_.dim, shape_str(k.shape()), shape_str(v.shape()));
  }
}

void AffineRingKVCache::ensure_configured(const Tensor& k, const Tensor& v) {
  if (rows_ > 0) return;
  for (int64_t d : {k.size(3), v.size(3)})
    TERN_CHECK(d % key_.group == 0 && d <= 1024,
               "[kv-cache] affine storage expects head_dim a multiple of the group {} (at most 1024), got {}",
               key_.group, d);
  key_.dim = k.size(3);
  value_.dim = v.size(3);
  batch_ = k.size(0);
  heads_ = k.size(1);
  rows_ = batch_ * heads_;
}

Tensor AffineRingKVCache::decode_last(bool keys, int64_t n, int64_t extra) const {
  TERN_ASSERT(n >= 0 && n <= stored(), "[kv-cache] ring view of {} positions with {} stored", n, stored());
  const AffineRowCodec& codec = keys ? key_ : value_;
  const int64_t dim = codec.dim, total = n + extra, row_bytes = codec.row_bytes();
  Tensor out = Tensor::empty({batch_, heads_, total, dim}, Dtype::f32);
  float* op = out.data<float>();
  const uint8_t* src = keys ? keys_.data() : values_.data();
  const int64_t first = offset_ - n;
  parallel_for(n * rows_, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / rows_, row = i % rows_, slot = (first + t) % window_;
      codec.decode(src + (slot * rows_ + row) * row_bytes, op + (row * total + t) * dim);
    }
  });
  return out;
}

void AffineRingKVCache::write(const Tensor& k, const Tensor& v) {
  const int64_t n = k.size(2), first = offset_ - n;
  TERN_ASSERT(n <= window_, "[kv-cache] ring write of {} positions into a window of {}", n, window_);
  const int64_t slots = std::min(offset_, window_);  // grows up to the window, then stays
  if (static_cast<int64_t>(keys_.size()) < slots * rows_ * key_.row_bytes()) {
    keys_.resize(static_cast<size_t>(slots * rows_ * key_.row_bytes()));
    values_.resize(static_cast<size_t>(slots * rows_ * value_.row_bytes()));
  }
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  parallel_for(n * rows_, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / rows_, row = i % rows_, dst = ((first + t) % window_) * rows_ + row;
      key_.encode(kp + (row * n + t) * key_.dim, keys_.data() + dst * key_.row_bytes());
      value_.encode(vp + (row * n + t) * value_.dim, values_.data() + dst * value_.row_bytes());
    }
  });
}

void AffineRingKVCache::adopt(const Tensor& k_in, const Tensor& v_in, int64_t offset) {
  TERN_CHECK(offset_ == 0 && rows_ == 0, "[kv-cache] expected an empty affine ring to adopt into, got offset {}",
             offset_);
  check_append(k_in, v_in);
  const int64_t n = k_in.size(2);
  TERN_CHECK(n <= window_ && n <= offset && (n == window_ || n == offset),
             "[kv-cache] expected the last min(offset, window) = {} positions of a ring, got {}",
             std::min(offset, window_), n);
  ensure_configured(k_in, v_in);
  offset_ = offset;
  if (n > 0) write(as_f32(k_in), as_f32(v_in));
}

std::unique_ptr<AttentionRead> AffineRingKVCache::append(const Tensor& k_in, const Tensor& v_in, AppendPhase phase) {
  check_append(k_in, v_in);
  TERN_CHECK(phase == AppendPhase::window || k_in.size(2) == 1,
             "[kv-cache] expected one position for a decode append, got {}", k_in.size(2));
  ensure_configured(k_in, v_in);
  Tensor k = as_f32(k_in), v = as_f32(v_in);
  const int64_t n = k.size(2);
  // The read: the last window-1 stored positions (all a new query can still see), then the new ones.
  const int64_t prev = std::min(offset_, window_ - 1);
  Tensor kr = decode_last(true, prev, n), vr = decode_last(false, prev, n);
  kr.slice(2, prev, prev + n).copy_from(k);
  vr.slice(2, prev, prev + n).copy_from(v);
  auto read = causal_read(std::move(kr), std::move(vr), prev, window_);

  const int64_t keep = std::min(n, window_);
  if (in_spec_round()) save_overwritten(n);
  offset_ += n;
  write(keep == n ? k : k.slice(2, n - keep, n).contiguous(), keep == n ? v : v.slice(2, n - keep, n).contiguous());
  return read;
}

void AffineRingKVCache::spec_round_begin() {
  KVCache::spec_round_begin();
  saved_keys_.clear();
  saved_values_.clear();
  saved_from_ = saved_to_ = std::max<int64_t>(0, offset_ - window_);
}

void AffineRingKVCache::spec_round_commit() {
  KVCache::spec_round_commit();
  saved_keys_.clear();
  saved_values_.clear();
}

void AffineRingKVCache::save_overwritten(int64_t n) {
  // As RingKVCache: appending n leaves [offset + n - window, offset + n) held, and positions from
  // before the round go in time order.
  const int64_t to = std::min(spec_round_start(), offset_ + n - window_);
  const int64_t kb = rows_ * key_.row_bytes(), vb = rows_ * value_.row_bytes();
  for (int64_t q = saved_to_; q < to; ++q) {
    const int64_t slot = q % window_;
    saved_keys_.insert(saved_keys_.end(), keys_.begin() + slot * kb, keys_.begin() + (slot + 1) * kb);
    saved_values_.insert(saved_values_.end(), values_.begin() + slot * vb, values_.begin() + (slot + 1) * vb);
  }
  saved_to_ = std::max(saved_to_, to);
}

int64_t AffineRingKVCache::spec_round_rollback(int64_t keep) {
  const int64_t drafted = check_spec_rollback(keep), target = spec_round_start() + keep;
  TERN_CHECK(keep == drafted || drafted <= window_,
             "[kv-cache] expected a speculative round of at most the ring's window ({}) to roll back, got {} drafted "
             "positions (keep all of them or none of the round can be restored)",
             window_, drafted);
  const int64_t kb = rows_ * key_.row_bytes(), vb = rows_ * value_.row_bytes();
  for (int64_t q = std::max(saved_from_, target - window_); q < saved_to_; ++q) {
    const int64_t slot = q % window_, i = q - saved_from_;
    std::copy(saved_keys_.begin() + i * kb, saved_keys_.begin() + (i + 1) * kb, keys_.begin() + slot * kb);
    std::copy(saved_values_.begin() + i * vb, saved_values_.begin() + (i + 1) * vb, values_.begin() + slot * vb);
  }
  offset_ = target;
  saved_keys_.clear();
  saved_values_.clear();
  end_spec_round();
  return 0;
}

}  // namespace tern
