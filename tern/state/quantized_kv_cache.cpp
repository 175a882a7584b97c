// QuantizedKVCache: position-major encoded rows, the decode-then-attend read, trimming.
#include "tern/state/quantized_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "tern/base/parallel.h"
#include "tern/ops/attention.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/state/cache_file.h"
#include "tern/state/packed_decode_read.h"

namespace tern {
namespace {

// Attention over decoded keys/values; when the values were read in another domain (TurboQuant's
// deferred read), each output row is mapped back once.
class DecodedRead : public AttentionRead {
 public:
  DecodedRead(Tensor k, Tensor v, int64_t q_offset, std::function<void(float*)> finish)
      : k_(std::move(k)), v_(std::move(v)), finish_(std::move(finish)) {
    mask_.causal = true;
    mask_.q_offset = q_offset;
  }
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    if (!finish_) return ops::sdpa(q, k_, v_, scale, mask_, softcap);
    Tensor q32 = q.dtype() == Dtype::f32 ? q : ops::cast(q, Dtype::f32);
    Tensor o = ops::sdpa(q32, k_, v_, scale, mask_, softcap).contiguous();  // [B, Hq, L, Dv]
    const int64_t dv = o.size(3), rows = o.numel() / dv;
    float* p = o.data<float>();
    parallel_for(rows, 16, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) finish_(p + r * dv);
    });
    return q.dtype() == Dtype::f32 ? o : ops::cast(o, q.dtype());
  }

 private:
  Tensor k_, v_;
  ops::AttentionMask mask_;
  std::function<void(float*)> finish_;
};

Tensor as_f32(const Tensor& x) { return (x.dtype() == Dtype::f32 ? x : ops::cast(x, Dtype::f32)).contiguous(); }

}  // namespace

Tensor QuantizedKVCache::next_positions(int64_t n) const {
  if (step_) return step_->positions.view({step_->positions.size(0), 1});
  return uniform_positions(offset_, n);
}

int64_t QuantizedKVCache::trim(int64_t n) {
  TERN_CHECK(!step_, "[kv-cache] expected no trim while a compiled decode step is attached");
  TERN_CHECK(n >= 0, "[kv-cache] expected a non-negative trim count, got {}", n);
  const int64_t t = std::min(n, offset_);
  offset_ -= t;
  if (on_device()) return t;  // the device storage keeps its capacity
  keys_.resize(static_cast<size_t>(offset_ * rows_ * key_row_bytes_));
  values_.resize(static_cast<size_t>(offset_ * rows_ * value_row_bytes_));
  return t;
}

int64_t QuantizedKVCache::bytes() const {
  if (on_device()) return device_keys_.numel() + device_values_.numel();
  return static_cast<int64_t>(keys_.capacity() + values_.capacity());
}

void QuantizedKVCache::check_append(const Tensor& k, const Tensor& v) const {
  TERN_CHECK(k.device() == v.device(), "[kv-cache] expected k and v on one device, got {} and {}", k.device().str(),
             v.device().str());
  if (rows_ > 0)
    TERN_CHECK(k.device().is_cuda() == on_device(), "[kv-cache] expected appends on the {} storage's device ({}), got {}",
               kind_name(), on_device() ? device_keys_.device().str() : "cpu", k.device().str());
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
  configure(k.size(3), v.size(3), key_row_bytes_, value_row_bytes_);
  key_dim_ = k.size(3);
  value_dim_ = v.size(3);
  batch_ = k.size(0);
  heads_ = k.size(1);
  rows_ = batch_ * heads_;
}

void QuantizedKVCache::store(const Tensor& k_in, const Tensor& v_in) {
  check_append(k_in, v_in);
  ensure_configured(k_in, v_in);
  if (k_in.device().is_cuda()) {
    store_on_device(k_in, v_in);
    return;
  }
  Tensor k = as_f32(k_in), v = as_f32(v_in);
  const int64_t n = k.size(2), start = offset_;
  if (capacity() < start + n) {  // never shrinks a reservation
    keys_.resize(static_cast<size_t>((start + n) * rows_ * key_row_bytes_));
    values_.resize(static_cast<size_t>((start + n) * rows_ * value_row_bytes_));
  }
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  parallel_for(n * rows_, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t pos = i / rows_, row = i % rows_;
      const int64_t dst = (start + pos) * rows_ + row;
      encode_key(kp + (row * n + pos) * key_dim_, keys_.data() + dst * key_row_bytes_);
      encode_value(vp + (row * n + pos) * value_dim_, values_.data() + dst * value_row_bytes_);
    }
  });
  offset_ = start + n;
}

// [B, Hkv, offset + extra, dim] f32 with the first offset positions decoded (the rest uninitialised).
Tensor QuantizedKVCache::decode_prefix(bool keys, bool read_domain, int64_t extra) const {
  const int64_t dim = keys ? key_dim_ : value_dim_, total = offset_ + extra;
  Tensor out = Tensor::empty({batch_, heads_, total, dim}, Dtype::f32);
  float* op = out.data<float>();
  const int64_t row_bytes = keys ? key_row_bytes_ : value_row_bytes_;
  const uint8_t* src = keys ? keys_.data() : values_.data();
  parallel_for(offset_ * rows_, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t pos = i / rows_, row = i % rows_;
      const uint8_t* in = src + i * row_bytes;
      float* x = op + (row * total + pos) * dim;
      if (keys) decode_key(in, x);
      else if (read_domain) decode_value_for_read(in, x);
      else decode_value(in, x);
    }
  });
  return out;
}

Tensor QuantizedKVCache::dequantized_keys() const {
  TERN_CHECK(rows_ > 0, "[kv-cache] expected a {} storage holding positions, got an empty one", kind_name());
  if (on_device()) return ops::kv_decode(device_rows(true), key_codec(), Dtype::f32);
  return decode_prefix(true, false, 0);
}

Tensor QuantizedKVCache::dequantized_values() const {
  TERN_CHECK(rows_ > 0, "[kv-cache] expected a {} storage holding positions, got an empty one", kind_name());
  if (on_device()) return ops::kv_decode(device_rows(false), value_codec(), Dtype::f32);
  return decode_prefix(false, false, 0);
}

Tensor QuantizedKVCache::device_rows(bool keys) const {
  return (keys ? device_keys_ : device_values_).slice(0, 0, offset_);
}

void QuantizedKVCache::grow_device(int64_t need, const Device& device) {
  if (on_device() && device_keys_.size(0) >= need) return;
  // Capacity doubles (at least 256 positions); the prefix moves over, views held by reads stay valid.
  const int64_t cap = std::max<int64_t>({need, on_device() ? 2 * device_keys_.size(0) : 0, 256});
  for (bool keys : {true, false}) {
    Tensor& dst = keys ? device_keys_ : device_values_;
    Tensor grown =
        Tensor::empty({cap, batch_, heads_, keys ? key_row_bytes_ : value_row_bytes_}, Dtype::u8, device);
    if (offset_ > 0) grown.slice(0, 0, offset_).copy_from(dst.slice(0, 0, offset_));
    dst = std::move(grown);
  }
}

Tensor QuantizedKVCache::host_rows(bool keys, int64_t n) const {
  const int64_t rb = keys ? key_row_bytes_ : value_row_bytes_;
  const std::vector<uint8_t>& store = keys ? keys_ : values_;
  const auto bytes = static_cast<size_t>(n * rows_ * rb);
  TERN_CHECK(bytes <= store.size(), "[kv-cache] expected {} stored positions, got fewer", n);
  const Shape shape{n, batch_, heads_, rb};
  if (bytes == 0) return Tensor::empty(shape, Dtype::u8);
  auto* data = const_cast<uint8_t*>(store.data());
  return Tensor::from_storage(Storage::borrow(data, bytes, Device::cpu(), nullptr), 0, shape, contiguous_strides(shape),
                              Dtype::u8);
}

void QuantizedKVCache::store_on_device(const Tensor& k, const Tensor& v) {
  const int64_t n = k.size(2), need = offset_ + n;
  grow_device(need, k.device());
  Tensor kd = device_keys_.slice(0, offset_, need), vd = device_values_.slice(0, offset_, need);
  ops::kv_encode(k, key_codec(), kd);
  ops::kv_encode(v, value_codec(), vd);
  offset_ = need;
}

std::unique_ptr<AttentionRead> QuantizedKVCache::append_on_device(const Tensor& k, const Tensor& v, AppendPhase phase) {
  const int64_t start = offset_;
  const ops::KVRowCodec kc = key_codec(), vc = value_codec();
  Tensor k_rows = start > 0 ? device_rows(true) : Tensor::empty({0, batch_, heads_, key_row_bytes_}, Dtype::u8, k.device());
  Tensor v_rows =
      start > 0 ? device_rows(false) : Tensor::empty({0, batch_, heads_, value_row_bytes_}, Dtype::u8, k.device());
  std::unique_ptr<AttentionRead> read;
  if (phase == AppendPhase::decode && packed_decode_supported(kc, vc)) {
    read = packed_decode_read(k_rows, v_rows, kc, vc, k, v);
  } else {
    // Window (prefill) over a quantized prefix: decode it into a temporary and run the flash sdpa.
    Tensor kr = k, vr = v;
    if (start > 0) {
      kr = ops::concat({ops::kv_decode(k_rows, kc, k.dtype()), k}, 2);
      vr = ops::concat({ops::kv_decode(v_rows, vc, v.dtype()), v}, 2);
    }
    read = std::make_unique<DecodedRead>(std::move(kr), std::move(vr), start, nullptr);
  }
  store_on_device(k, v);
  return read;
}

std::unique_ptr<AttentionRead> QuantizedKVCache::append(const Tensor& k_in, const Tensor& v_in, AppendPhase phase) {
  check_append(k_in, v_in);
  TERN_CHECK(phase == AppendPhase::window || k_in.size(2) == 1,
             "[kv-cache] expected one position for a decode append, got {}", k_in.size(2));
  if (step_) {
    TERN_CHECK(phase == AppendPhase::decode,
               "[kv-cache] expected decode appends while a compiled decode step is attached, got a window");
    return append_step(k_in, v_in);
  }
  if (k_in.device().is_cuda()) {
    ensure_configured(k_in, v_in);
    return append_on_device(k_in, v_in, phase);
  }
  Tensor k = as_f32(k_in), v = as_f32(v_in);
  const int64_t start = offset_, n = k.size(2);
  ensure_configured(k, v);
  const ops::KVRowCodec kc = key_codec(), vc = value_codec();
  if (phase == AppendPhase::decode && packed_decode_supported(kc, vc)) {
    // The packed prefix is read block by block by the fused decode attention, never decoded whole (the
    // views are taken after store(), which may move the storage).
    store(k, v);
    return packed_decode_read(host_rows(true, start), host_rows(false, start), kc, vc, k, v);
  }
  Tensor kr = decode_prefix(true, true, n), vr = decode_prefix(false, true, n);
  kr.slice(2, start, start + n).copy_from(k);
  Tensor vnew = vr.slice(2, start, start + n);
  vnew.copy_from(v);
  if (read_needs_finish()) {
    float* vp = vr.data<float>();
    const int64_t total = start + n;
    parallel_for(rows_ * n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) read_domain_value(vp + ((i / n) * total + start + i % n) * value_dim_);
    });
  }
  store(k, v);
  std::function<void(float*)> finish;
  if (read_needs_finish()) finish = [this](float* x) { finish_output_row(x); };
  return std::make_unique<DecodedRead>(std::move(kr), std::move(vr), start, std::move(finish));
}

int64_t QuantizedKVCache::capacity() const {
  if (rows_ == 0) return 0;
  if (on_device()) return device_keys_.size(0);
  return static_cast<int64_t>(keys_.size()) / (rows_ * key_row_bytes_);
}

bool QuantizedKVCache::supports_device_step() const {
  return rows_ == 0 || !on_device() || packed_decode_supported(key_codec(), value_codec());
}

void QuantizedKVCache::reserve(int64_t positions) {
  TERN_CHECK(rows_ > 0, "[kv-cache] expected an append before reserve() (it fixes the shapes)");
  TERN_CHECK(!step_, "[kv-cache] expected reserve() before a compiled decode step is attached");
  if (on_device()) {
    grow_device(positions, device_keys_.device());
  } else if (capacity() < positions) {
    keys_.resize(static_cast<size_t>(positions * rows_ * key_row_bytes_));
    values_.resize(static_cast<size_t>(positions * rows_ * value_row_bytes_));
  }
}

void QuantizedKVCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || supports_device_step(), "[kv-cache] storage {} does not support compiled decode (head dims {} / {})",
             signature(), key_dim_, value_dim_);
  const Device storage = on_device() ? device_keys_.device() : Device::cpu();
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
  const ops::KVRowCodec kc = key_codec(), vc = value_codec();
  Tensor k_rows, v_rows;
  if (on_device()) {
    for (bool keys : {true, false}) {
      const ops::KVRowCodec& c = keys ? kc : vc;
      Tensor row = Tensor::empty({1, batch_, heads_, c.row_bytes()}, Dtype::u8, k.device());
      ops::kv_encode(keys ? k : v, c, row);
      // [capacity, B, Hkv, row bytes] seen as [B, Hkv, capacity, row bytes]: row b lands at positions[b].
      Tensor dst = (keys ? device_keys_ : device_values_).permute({1, 2, 0, 3});
      ops::write_positions(dst, row.permute({1, 2, 0, 3}), st.positions);
    }
    k_rows = device_keys_.slice(0, 0, st.span);
    v_rows = device_values_.slice(0, 0, st.span);
  } else {
    const Tensor kf = as_f32(k), vf = as_f32(v), pos = st.positions.contiguous();
    const int64_t cap = capacity();
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t p = pos.data<int32_t>()[b];
      TERN_CHECK(p >= 0 && p < cap, "[kv-cache] expected a step position in [0, {}), got {}", cap, p);
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t row = b * heads_ + h, dst = p * rows_ + row;
        encode_key(kf.data<float>() + row * key_dim_, keys_.data() + dst * key_row_bytes_);
        encode_value(vf.data<float>() + row * value_dim_, values_.data() + dst * value_row_bytes_);
      }
    }
    k_rows = host_rows(true, st.span);
    v_rows = host_rows(false, st.span);
  }
  // The stored positions row b reads are those before its own: positions[b] of them.
  return packed_decode_read(k_rows, v_rows, kc, vc, k, v, st.positions);
}

void QuantizedKVCache::save(CacheWriter& out) const {
  out.put_string("kind", "quantized");
  out.put_string("signature", signature());
  out.put_int("offset", offset_);
  if (rows_ == 0) return;
  out.put_int("batch", batch_);
  out.put_int("heads", heads_);
  out.put_int("key_dim", key_dim_);
  out.put_int("value_dim", value_dim_);
  out.put_int("key_row_bytes", key_row_bytes_);
  out.put_int("value_row_bytes", value_row_bytes_);
  if (on_device()) {
    // Persistence files hold host bytes: the packed rows come over as they are.
    for (bool keys : {true, false}) {
      const Tensor host = device_rows(keys).to(Device::cpu());
      const uint8_t* p = host.data<uint8_t>();
      out.put_bytes(keys ? "keys" : "values", std::vector<uint8_t>(p, p + host.numel()));
    }
    return;
  }
  // Only the stored prefix: the vectors may hold a reservation past it.
  out.put_bytes("keys", std::vector<uint8_t>(keys_.begin(), keys_.begin() + offset_ * rows_ * key_row_bytes_));
  out.put_bytes("values",
                std::vector<uint8_t>(values_.begin(), values_.begin() + offset_ * rows_ * value_row_bytes_));
}

void QuantizedKVCache::load(CacheReader& in) {
  TERN_CHECK(rows_ == 0 && offset_ == 0, "[prompt-cache] expected a fresh {} storage to load into", kind_name());
  in.expect("kind", "quantized");
  in.expect("signature", signature());
  const int64_t n = in.get_int("offset");
  if (!in.has("batch")) {
    if (n != 0) in.fail(fmt::format("{} positions stored without a row layout", n));
    return;
  }
  const int64_t batch = in.get_int("batch"), heads = in.get_int("heads");
  const int64_t key_dim = in.get_int("key_dim"), value_dim = in.get_int("value_dim");
  if (batch <= 0 || heads <= 0 || key_dim <= 0 || value_dim <= 0 || n < 0)
    in.fail(fmt::format("expected a positive row layout, got batch {}, heads {}, dims {} / {}, offset {}", batch, heads,
                        key_dim, value_dim, n));
  int64_t krb = 0, vrb = 0;
  configure(key_dim, value_dim, krb, vrb);
  in.expect("key_row_bytes", krb);
  in.expect("value_row_bytes", vrb);
  std::vector<uint8_t> k = in.get_bytes("keys"), v = in.get_bytes("values");
  const int64_t rows = batch * heads;
  if (static_cast<int64_t>(k.size()) != n * rows * krb || static_cast<int64_t>(v.size()) != n * rows * vrb)
    in.fail(fmt::format("expected {} and {} packed bytes for {} positions, got {} and {}", n * rows * krb,
                        n * rows * vrb, n, k.size(), v.size()));
  key_dim_ = key_dim;
  value_dim_ = value_dim;
  batch_ = batch;
  heads_ = heads;
  rows_ = rows;
  key_row_bytes_ = krb;
  value_row_bytes_ = vrb;
  device_keys_ = device_values_ = Tensor();
  if (in.device().is_cpu()) {
    offset_ = n;
    keys_ = std::move(k);
    values_ = std::move(v);
    return;
  }
  // A GPU run: the packed rows go straight to device storage.
  keys_.clear();
  values_.clear();
  offset_ = 0;
  grow_device(n, in.device());
  offset_ = n;
  if (n == 0) return;
  for (bool keys : {true, false}) {
    const std::vector<uint8_t>& bytes = keys ? k : v;
    Tensor host = Tensor::empty({n, batch, heads, keys ? krb : vrb}, Dtype::u8);
    std::memcpy(host.data_ptr(), bytes.data(), bytes.size());
    (keys ? device_keys_ : device_values_).slice(0, 0, n).copy_from(host);
  }
}

}  // namespace tern
