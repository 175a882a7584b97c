// QuantizedKVCache: position-major packed rows in tensors, their reads, trimming, compiled decode and
// persistence.
#include "tern/state/quantized_kv_cache.h"

#include <algorithm>
#include <cstring>

#include "tern/state/cache_file.h"
#include "tern/state/packed_read.h"

namespace tern {
Tensor QuantizedKVCache::next_positions(int64_t n) const {
  if (step_) return step_->positions.view({step_->positions.size(0), 1});
  return uniform_positions(offset_, n);
}

int64_t QuantizedKVCache::trim(int64_t n) {
  TERN_CHECK(!step_, "[kv-cache] expected no trim while a compiled decode step is attached");
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  const int64_t t = std::min(n, offset_);
  offset_ -= t;  // the storage keeps its capacity
  return t;
}

int64_t QuantizedKVCache::bytes() const {
  return (keys_.defined() ? keys_.nbytes() : 0) + (values_.defined() ? values_.nbytes() : 0);
}

void QuantizedKVCache::check_append(const Tensor& k, const Tensor& v) const {
  TERN_CHECK(k.device() == v.device(), "[kv-cache] expected k and v on one device, got {} and {}", k.device().str(),
             v.device().str());
  if (keys_.defined())
    TERN_CHECK(k.device() == keys_.device(), "[kv-cache] expected appends on the {} storage's device ({}), got {}",
               kind_name(), keys_.device().str(), k.device().str());
  TERN_CHECK(k.rank() == 4 && v.rank() == 4, "[kv-cache] expected k and v of rank 4 [B, Hkv, L, D], got {} and {}",
             shape_str(k.shape()), shape_str(v.shape()));
  TERN_CHECK(k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2),
             "[kv-cache] expected k and v to agree on [B, Hkv, L], got {} and {}", shape_str(k.shape()),
             shape_str(v.shape()));
  if (rows_ > 0) {
    TERN_CHECK(k.size(0) == batch_ && k.size(1) == heads_ && k.size(3) == key_dim_ && v.size(3) == value_dim_,
               "[kv-cache] expected appends of [{}, {}, L, {}] / [.., {}], got {} and {}", batch_, heads_, key_dim_,
               value_dim_, shape_str(k.shape()), shape_str(v.shape()));
  }
}

void QuantizedKVCache::ensure_configured(const Tensor& k, const Tensor& v) {
  if (rows_ > 0) return;
  configure(k.size(3), v.size(3));
  key_dim_ = k.size(3);
  value_dim_ = v.size(3);
  key_row_bytes_ = key_codec().row_bytes();
  value_row_bytes_ = value_codec().row_bytes();
  batch_ = k.size(0);
  heads_ = k.size(1);
  rows_ = batch_ * heads_;
}

Tensor QuantizedKVCache::rows(bool keys, int64_t n) const {
  TERN_ASSERT(n >= 0 && n <= capacity(), "[kv-cache] {} stored rows of a capacity of {}", n, capacity());
  if (!keys_.defined()) return Tensor::empty({0, batch_, heads_, keys ? key_row_bytes_ : value_row_bytes_}, Dtype::u8);
  return (keys ? keys_ : values_).slice(0, 0, n);
}

void QuantizedKVCache::grow(int64_t need, const Device& device) {
  if (keys_.defined() && keys_.size(0) >= need) return;
  // Capacity doubles (at least 256 positions); the prefix moves over, views held by reads stay valid.
  const int64_t cap = std::max<int64_t>({need, keys_.defined() ? 2 * keys_.size(0) : 0, 256});
  for (bool keys : {true, false}) {
    Tensor& dst = keys ? keys_ : values_;
    Tensor grown = Tensor::empty({cap, batch_, heads_, keys ? key_row_bytes_ : value_row_bytes_}, Dtype::u8, device);
    if (offset_ > 0) {
      Tensor held = grown.slice(0, 0, offset_);
      held.copy_from(dst.slice(0, 0, offset_));
    }
    dst = std::move(grown);
  }
}

void QuantizedKVCache::store(const Tensor& k, const Tensor& v) {
  check_append(k, v);
  ensure_configured(k, v);
  const int64_t need = offset_ + k.size(2);
  grow(need, k.device());
  Tensor kd = keys_.slice(0, offset_, need), vd = values_.slice(0, offset_, need);
  ops::kv_encode(k, key_codec(), kd);
  ops::kv_encode(v, value_codec(), vd);
  offset_ = need;
}

Tensor QuantizedKVCache::dequantized_keys() const {
  TERN_CHECK(rows_ > 0, "[kv-cache] expected a {} storage holding positions, got an empty one", kind_name());
  return ops::kv_decode(rows(true, offset_), key_codec(), Dtype::f32);
}

Tensor QuantizedKVCache::dequantized_values() const {
  TERN_CHECK(rows_ > 0, "[kv-cache] expected a {} storage holding positions, got an empty one", kind_name());
  return ops::kv_decode(rows(false, offset_), value_codec(), Dtype::f32);
}

std::unique_ptr<AttentionRead> QuantizedKVCache::append(const Tensor& k, const Tensor& v, AppendPhase phase) {
  check_append(k, v);
  TERN_CHECK(phase == AppendPhase::window || k.size(2) == 1,
             "[kv-cache] expected one position for a decode append, got {}", k.size(2));
  if (step_) {
    TERN_CHECK(phase == AppendPhase::decode,
               "[kv-cache] expected decode appends while a compiled decode step is attached, got a window");
    return append_step(k, v);
  }
  ensure_configured(k, v);
  const int64_t start = offset_;
  const ops::KVRowCodec kc = key_codec(), vc = value_codec();
  // The views of the stored rows are taken after store(), which may move the storage; the appended
  // positions lie past them.
  store(k, v);
  return packed_read(rows(true, start), rows(false, start), kc, vc, k, v, phase, 0, deferred_values());
}

int64_t QuantizedKVCache::capacity() const { return keys_.defined() ? keys_.size(0) : 0; }

bool QuantizedKVCache::supports_device_step() const {
  return rows_ == 0 || !keys_.defined() || ops::kv_decode_attention_supported(key_codec(), value_codec(), keys_.device());
}

void QuantizedKVCache::reserve(int64_t positions) {
  TERN_CHECK(rows_ > 0 && keys_.defined(), "[kv-cache] expected an append before reserve() (it fixes the shapes)");
  TERN_CHECK(!step_, "[kv-cache] expected reserve() before a compiled decode step is attached");
  grow(positions, keys_.device());
}

void QuantizedKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || supports_device_step(), "[kv-cache] storage {} does not support compiled decode (head dims {} / {})",
             signature(), key_dim_, value_dim_);
  const Device storage = keys_.defined() ? keys_.device() : Device::cpu();
  TERN_CHECK(!step || (rows_ > 0 && step->span >= 0 && step->span <= capacity() &&
                       step->positions.device() == storage && step->positions.dtype() == Dtype::i32 &&
                       step->positions.numel() == batch_),
             "[kv-cache] expected a compiled step span within the reserved {} positions and positions [{}] i32 on {}, "
             "got span {}",
             capacity(), batch_, storage.str(), step ? step->span : 0);
  step_ = step;
}

void QuantizedKVCache::advance(int64_t n) {
  TERN_CHECK(n >= 0 && offset_ + n <= capacity(), "[kv-cache] expected to advance within {} positions, got {} + {}",
             capacity(), offset_, n);
  offset_ += n;
}

std::unique_ptr<AttentionRead> QuantizedKVCache::append_step(const Tensor& k, const Tensor& v) {
  const DeviceStep& st = *step_;
  // Row b of the step's keys and values is encoded straight into position positions[b] by the read's
  // first attend (on CUDA in the read's combine launch); the stored positions row b reads are those
  // before its own: positions[b] of them.
  return packed_store_read(rows(true, st.span), rows(false, st.span), key_codec(), value_codec(), k, v, st.positions,
                           keys_, values_);
}

void QuantizedKVCache::save(CacheWriter& out) const {
  out.put_string("kind", "quantized");
  out.put_string("signature", signature());
  put_row_layout(out, {offset_, rows_ > 0, batch_, heads_, key_dim_, value_dim_});
  if (rows_ == 0) return;
  out.put_int("key_row_bytes", key_row_bytes_);
  out.put_int("value_row_bytes", value_row_bytes_);
  // Persistence files hold host bytes: the packed rows of the stored prefix come over as they are.
  for (bool keys : {true, false}) {
    const Tensor host = rows(keys, offset_).to(Device::cpu()).contiguous();
    const uint8_t* p = host.numel() > 0 ? host.data<uint8_t>() : nullptr;
    out.put_bytes(keys ? "keys" : "values", std::vector<uint8_t>(p, p + host.numel()));
  }
}

void QuantizedKVCache::load(CacheReader& in) {
  TERN_CHECK(rows_ == 0 && offset_ == 0, "[prompt-cache] expected a fresh {} storage to load into", kind_name());
  in.expect("kind", "quantized");
  in.expect("signature", signature());
  const PackedRowLayout l = get_row_layout(in);
  if (!l.configured) return;
  configure(l.key_dim, l.value_dim);
  key_dim_ = l.key_dim;
  value_dim_ = l.value_dim;
  const int64_t krb = key_codec().row_bytes(), vrb = value_codec().row_bytes(), n = l.offset;
  in.expect("key_row_bytes", krb);
  in.expect("value_row_bytes", vrb);
  std::vector<uint8_t> k = in.get_bytes("keys"), v = in.get_bytes("values");
  // Sizes by division: n comes from the file and may be anything.
  const int64_t kpos = l.batch * l.heads * krb, vpos = l.batch * l.heads * vrb;
  const auto holds_n = [n](size_t bytes, int64_t per) {
    return static_cast<int64_t>(bytes) % per == 0 && static_cast<int64_t>(bytes) / per == n;
  };
  if (!holds_n(k.size(), kpos) || !holds_n(v.size(), vpos))
    in.fail(fmt::format("expected {} positions of {} and {} packed bytes, got {} and {} bytes", n, kpos, vpos, k.size(),
                        v.size()));
  batch_ = l.batch;
  heads_ = l.heads;
  rows_ = l.batch * l.heads;
  key_row_bytes_ = krb;
  value_row_bytes_ = vrb;
  grow(n, in.device());
  offset_ = n;
  if (n == 0) return;
  for (bool keys : {true, false}) {
    const std::vector<uint8_t>& bytes = keys ? k : v;
    Tensor host = Tensor::empty({n, l.batch, l.heads, keys ? krb : vrb}, Dtype::u8);
    std::memcpy(host.data_ptr(), bytes.data(), bytes.size());
    Tensor dst = (keys ? keys_ : values_).slice(0, 0, n);
    dst.copy_from(host);
  }
}

}  // namespace tern
