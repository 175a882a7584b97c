// Quantized KV rows: codec validation, output allocation and backend dispatch.
#include "tern/ops/kv_quant.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tern/ops/affine_codec.h"
#include "tern/ops/attention.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/turboquant.h"

namespace tern::ops {

int64_t KVRowCodec::row_bytes() const {
  TERN_CHECK(dim > 0, "[kv-quant] expected a positive row dim, got {}", dim);
  switch (kind) {
    case affine:
      TERN_CHECK(bits == 4 || bits == 8, "[kv-quant] expected affine bits 4 or 8, got {}", bits);
      TERN_CHECK(group == 32 || group == 64 || group == 128, "[kv-quant] expected an affine group of 32, 64 or 128, got {}",
                 group);
      TERN_CHECK(dim % group == 0 && dim <= 1024, "[kv-quant] expected dim a multiple of {} (at most 1024), got {}",
                 group, dim);
      return AffineRowCodec::row_bytes(bits, group, dim);
    case turbo_key:
      TERN_CHECK(bits == 8 || bits == 4 || bits == 3, "[kv-quant] expected turbo key bits 8, 4 or 3, got {}", bits);
      TERN_CHECK(group == turboquant::kGroup && dim % group == 0 && dim <= 512,
                 "[kv-quant] expected turbo keys of group 32 and dim a multiple of 32 (at most 512), got {} and {}",
                 group, dim);
      if (bits == 8) return turboquant::key_row_bytes(dim);
      turboquant::signs(dim);  // rotated keys: dim a power of two in [32, 512]
      return turboquant::value_row_bytes(bits, dim);
    case turbo_value:
      TERN_CHECK(bits == 2 || bits == 3 || bits == 4 || bits == 8, "[kv-quant] expected turbo value bits 2, 3, 4 or 8, got {}",
                 bits);
      TERN_CHECK(group == turboquant::kGroup, "[kv-quant] expected turbo values of group 32, got {}", group);
      turboquant::signs(dim);  // throws unless dim is a power of two in [32, 512]
      return turboquant::value_row_bytes(bits, dim);
  }
  TERN_THROW("[kv-quant] unknown codec kind {}", static_cast<int>(kind));
}

namespace {

// The codec the CUDA kernels run for `c`: TurboQuant keys of 4 or 3 bits are value rows byte for byte
// (the CPU codes them with the value codec), so the value kernels encode and decode them.
KVRowCodec device_codec(const KVRowCodec& c) {
  if (c.kind == KVRowCodec::turbo_key && c.rotated()) return {KVRowCodec::turbo_value, c.bits, c.group, c.dim};
  return c;
}

void check_rows(const Tensor& rows, const KVRowCodec& codec, const char* what) {
  TERN_CHECK(rows.dtype() == Dtype::u8 && rows.rank() == 4 && rows.is_contiguous(),
             "[kv-quant] expected {} as contiguous u8 [S, B, H, row_bytes], got {} {}", what, dtype_name(rows.dtype()),
             shape_str(rows.shape()));
  TERN_CHECK(rows.size(3) == codec.row_bytes(), "[kv-quant] expected {} rows of {} bytes, got {}", what,
             codec.row_bytes(), rows.size(3));
}

// The checks both attention reads share: codecs of the right kinds, the rows' layout [S, B, Hkv, ..]
// alike for keys and values, the query's head_dim and B, and Hq % Hkv == 0.
void check_attention_rows(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                          const KVRowCodec& value_codec) {
  TERN_CHECK(key_codec.kind != KVRowCodec::turbo_value && value_codec.kind != KVRowCodec::turbo_key,
             "[kv-quant] expected a key codec for keys and a value codec for values");
  check_rows(k_rows, key_codec, "key rows");
  check_rows(v_rows, value_codec, "value rows");
  const int64_t B = q.size(0), Hq = q.size(1), S = k_rows.size(0), Hkv = k_rows.size(2);
  TERN_CHECK(key_codec.dim == q.size(3), "[kv-quant] expected key rows of the query's head_dim {}, got {}", q.size(3),
             key_codec.dim);
  TERN_CHECK(v_rows.size(0) == S && k_rows.size(1) == B && v_rows.size(1) == B && v_rows.size(2) == Hkv,
             "[kv-quant] expected key and value rows [S, {}, Hkv, ..] alike, got {} and {}", B,
             shape_str(k_rows.shape()), shape_str(v_rows.shape()));
  TERN_CHECK(Hkv > 0 && Hq % Hkv == 0, "[kv-quant] expected Hq % Hkv == 0, got {} and {}", Hq, Hkv);
}

}  // namespace

void kv_encode(const Tensor& x, const KVRowCodec& codec, Tensor& rows) {
  TERN_CHECK(x.defined() && is_floating(x.dtype()) && x.rank() == 4,
             "[kv-quant] expected a float x of rank 4 [B, H, L, dim], got {}", x.defined() ? shape_str(x.shape()) : "none");
  TERN_CHECK(x.size(3) == codec.dim, "[kv-quant] expected x rows of {} values, got {}", codec.dim, x.size(3));
  check_rows(rows, codec, "encode rows");
  TERN_CHECK(rows.size(0) == x.size(2) && rows.size(1) == x.size(0) && rows.size(2) == x.size(1),
             "[kv-quant] expected rows [{}, {}, {}, ..] for x {}, got {}", x.size(2), x.size(0), x.size(1),
             shape_str(x.shape()), shape_str(rows.shape()));
  TERN_CHECK(rows.device() == x.device(), "[kv-quant] expected rows on {}, got {}", x.device().str(),
             rows.device().str());
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) cpu::kv_encode(x, codec, rows);
  else
    cuda::kv_encode(x, device_codec(codec), rows);
}

namespace {
// kv_encode_positions' argument checks.
void check_step_store(const Tensor& k, const KVRowCodec& key_codec, const Tensor& keys, const Tensor& v,
                      const KVRowCodec& value_codec, const Tensor& values, const Tensor& positions, int64_t ring) {
  for (const auto& [x, c] : {std::pair{&k, &key_codec}, std::pair{&v, &value_codec}})
    TERN_CHECK(x->defined() && is_floating(x->dtype()) && x->rank() == 4 && x->size(2) == 1 && x->size(3) == c->dim,
               "[kv-quant] expected the step's k and v as float [B, H, 1, {}], got {}", c->dim,
               x->defined() ? shape_str(x->shape()) : "none");
  check_rows(keys, key_codec, "key storage");
  check_rows(values, value_codec, "value storage");
  TERN_CHECK(keys.size(0) == values.size(0) && keys.size(1) == k.size(0) && keys.size(2) == k.size(1) &&
                 values.size(1) == v.size(0) && values.size(2) == v.size(1),
             "[kv-quant] expected key and value storage [N, B, H, ..] for k {} and v {}, got {} and {}",
             shape_str(k.shape()), shape_str(v.shape()), shape_str(keys.shape()), shape_str(values.shape()));
  TERN_CHECK(keys.device() == k.device() && values.device() == k.device() && v.device() == k.device(),
             "[kv-quant] expected k, v and their storage on one device ({})", k.device().str());
  TERN_CHECK(positions.defined(), "[kv-quant] expected positions [{}] i32, got none", k.size(0));
  TERN_CHECK(positions.dtype() == Dtype::i32 && positions.numel() == k.size(0) && positions.device() == k.device(),
             "[kv-quant] expected positions [{}] i32 on {}, got {} {} on {}", k.size(0), k.device().str(),
             shape_str(positions.shape()), dtype_name(positions.dtype()), positions.device().str());
  TERN_CHECK(ring >= 0, "[kv-quant] expected a ring of >= 0 slots, got {}", ring);
}
}  // namespace

void kv_encode_positions(const Tensor& k, const KVRowCodec& key_codec, Tensor& keys, const Tensor& v,
                         const KVRowCodec& value_codec, Tensor& values, const Tensor& positions, int64_t ring) {
  check_step_store(k, key_codec, keys, v, value_codec, values, positions, ring);
  if (!k.device().is_cpu()) {
    cuda::kv_encode_positions(k, device_codec(key_codec), keys, v, device_codec(value_codec), values,
                              positions.contiguous(), ring);
    return;
  }
  Tensor krow = Tensor::empty({1, k.size(0), k.size(1), key_codec.row_bytes()}, Dtype::u8);
  Tensor vrow = Tensor::empty({1, v.size(0), v.size(1), value_codec.row_bytes()}, Dtype::u8);
  kv_encode(k, key_codec, krow);
  kv_encode(v, value_codec, vrow);
  // [N, B, H, row bytes] seen as [B, H, N, row bytes]: row b lands at positions[b].
  Tensor kdst = keys.permute({1, 2, 0, 3}), vdst = values.permute({1, 2, 0, 3});
  write_positions(kdst, krow.permute({1, 2, 0, 3}), vdst, vrow.permute({1, 2, 0, 3}), positions, ring);
}

Tensor kv_decode(const Tensor& rows, const KVRowCodec& codec, Dtype dtype, bool unrotate) {
  check_rows(rows, codec, "rows");
  TERN_CHECK(is_floating(dtype), "[kv-quant] expected a float decode dtype, got {}", dtype_name(dtype));
  Tensor out = Tensor::empty({rows.size(1), rows.size(2), rows.size(0), codec.dim}, dtype, rows.device());
  kv_decode_into(rows, codec, out, unrotate);
  return out;
}

void kv_decode_into(const Tensor& rows, const KVRowCodec& codec, Tensor& out, bool unrotate) {
  check_rows(rows, codec, "rows");
  const Shape want{rows.size(1), rows.size(2), rows.size(0), codec.dim};
  TERN_CHECK(out.defined() && is_floating(out.dtype()) && out.shape() == want && out.device() == rows.device(),
             "[kv-quant] expected a float out {} on {}, got {}", shape_str(want), rows.device().str(),
             out.defined() ? shape_str(out.shape()) + " " + dtype_name(out.dtype()) + " on " + out.device().str()
                           : "none");
  if (out.numel() == 0) return;
  const bool cpu = rows.device().is_cpu();
  auto decode = [&](Tensor& dst) {
    if (cpu) cpu::kv_decode(rows, codec, unrotate, dst);
    else cuda::kv_decode(rows, device_codec(codec), unrotate, dst);
  };
  // The CPU writes contiguous rows; CUDA also rows of dim one after another within each (b, h), each
  // (b, h) at one stride (positions [0, S) of a longer buffer). Any other view: through a temporary.
  const int64_t D = codec.dim;
  const bool direct = cpu ? out.is_contiguous()
                          : out.stride(3) == 1 && out.stride(2) == D && out.stride(1) % D == 0 &&
                                out.stride(1) / D >= want[2] && (want[0] == 1 || out.stride(0) == want[1] * out.stride(1));
  if (direct) {
    decode(out);
    return;
  }
  Tensor t = Tensor::empty(want, out.dtype(), out.device());
  decode(t);
  out.copy_from(t);
}

bool kv_decode_attention_supported(const KVRowCodec& key_codec, const KVRowCodec& value_codec, const Device& device) {
  if (device.is_cpu()) return true;
  const int64_t D = key_codec.dim;
  return value_codec.dim == D && (D == 32 || D == 64 || D == 128 || D == 256 || D == 512) &&
         (!key_codec.rotated() || cuda::kv_decode_reads_rotated_keys());
}

bool kv_ring_steps_supported(const Device& device) { return device.is_cpu() || cuda::kv_ring_steps(); }

Tensor kv_window_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                           const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                           float softcap, int64_t window, bool deferred) {
  TERN_CHECK(q.defined() && is_floating(q.dtype()) && q.rank() == 4 && q.size(2) > 0,
             "[kv-quant] expected a float q [B, Hq, L > 0, D], got {}", q.defined() ? shape_str(q.shape()) : "none");
  check_attention_rows(q, k_rows, key_codec, v_rows, value_codec);
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), S = k_rows.size(0), Hkv = k_rows.size(2);
  TERN_CHECK(k_new.defined() && v_new.defined() && k_new.rank() == 4 && v_new.rank() == 4 &&
                 is_floating(k_new.dtype()) && k_new.dtype() == v_new.dtype() &&
                 k_new.shape() == Shape({B, Hkv, L, key_codec.dim}) &&
                 v_new.shape() == Shape({B, Hkv, L, value_codec.dim}),
             "[kv-quant] expected k_new [{}, {}, {}, {}] and v_new [.., {}] of one float dtype, got {} and {}", B, Hkv,
             L, key_codec.dim, value_codec.dim, k_new.defined() ? shape_str(k_new.shape()) : "none",
             v_new.defined() ? shape_str(v_new.shape()) : "none");
  TERN_CHECK(window >= 0, "[kv-quant] expected a window >= 0, got {}", window);
  for (const Tensor* t : {&k_rows, &v_rows, &k_new, &v_new})
    TERN_CHECK(t->device() == q.device(), "[kv-quant] expected every input on {}, got {}", q.device().str(),
               t->device().str());
  if (q.device().is_cuda()) {
    if (window == 0 && S > 0 && cuda::kv_window_tiled(q, k_rows, device_codec(key_codec), v_rows, value_codec)) {
      Tensor out = Tensor::empty({B, Hq, L, value_codec.dim}, q.dtype(), q.device());
      cuda::kv_window_attention(q, k_rows, device_codec(key_codec), v_rows, value_codec, k_new, v_new, scale, softcap,
                                out);
      return out;
    }
    // Otherwise the prefix decoded into a temporary that the window's own positions follow, then the
    // flash sdpa.
    auto joined = [&](const Tensor& rows, const KVRowCodec& codec, const Tensor& fresh) {
      Tensor t = Tensor::empty({B, Hkv, S + L, codec.dim}, fresh.dtype(), q.device());
      Tensor head = t.narrow(2, 0, S), tail = t.narrow(2, S, L);
      kv_decode_into(rows, codec, head);
      tail.copy_from(fresh);
      return t;
    };
    Tensor k = k_new, v = v_new;
    if (S > 0) k = joined(k_rows, key_codec, k_new), v = joined(v_rows, value_codec, v_new);
    AttentionMask mask;
    mask.causal = true;
    mask.q_offset = S;
    mask.window = window;
    return sdpa(q, k, v, scale, mask, softcap);
  }
  Tensor out = Tensor::empty({B, Hq, L, value_codec.dim}, q.dtype(), q.device());
  cpu::kv_window_attention(q, k_rows, key_codec, v_rows, value_codec, k_new, v_new, scale, softcap, window, deferred,
                           out);
  return out;
}

namespace {
// kv_decode_attention, with (keys / values not null) kv_decode_attention_store's store.
Tensor decode_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                        const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                        float softcap, const Tensor& lengths, int64_t ring, Tensor* keys, Tensor* values) {
  TERN_CHECK(q.defined() && is_floating(q.dtype()) && q.rank() == 4 && q.size(2) == 1,
             "[kv-quant] expected a float q [B, Hq, 1, D], got {}", q.defined() ? shape_str(q.shape()) : "none");
  check_attention_rows(q, k_rows, key_codec, v_rows, value_codec);
  const int64_t B = q.size(0), Hq = q.size(1), S = k_rows.size(0), Hkv = k_rows.size(2);
  TERN_CHECK(k_new.defined() == v_new.defined(), "[kv-quant] expected k_new and v_new both given or both not");
  int64_t T = 0;
  if (k_new.defined()) {
    T = k_new.size(2);
    TERN_CHECK(k_new.rank() == 4 && v_new.rank() == 4 && k_new.dtype() == v_new.dtype() && T <= 1 &&
                   k_new.shape() == Shape({B, Hkv, T, key_codec.dim}) &&
                   v_new.shape() == Shape({B, Hkv, T, value_codec.dim}),
               "[kv-quant] expected k_new [{}, {}, T <= 1, {}] and v_new [.., {}] of one dtype, got {} and {}", B, Hkv,
               key_codec.dim, value_codec.dim, shape_str(k_new.shape()), shape_str(v_new.shape()));
  }
  TERN_CHECK(S + T > 0, "[kv-quant] expected at least one position to attend to, got none");
  for (const Tensor* t : {&k_rows, &v_rows, &k_new, &v_new, &lengths})
    TERN_CHECK(!t->defined() || t->device() == q.device(), "[kv-quant] expected every input on {}, got {}",
               q.device().str(), t->device().str());
  if (lengths.defined())
    TERN_CHECK(lengths.dtype() == Dtype::i32 && lengths.rank() == 1 && lengths.size(0) == B,
               "[kv-quant] expected lengths [{}] i32, got {} {}", B, shape_str(lengths.shape()),
               dtype_name(lengths.dtype()));
  TERN_CHECK(ring == 0 || (ring > 0 && lengths.defined() && S <= ring),
             "[kv-quant] expected a ring read of lengths over at most `ring` stored slots, got ring {} over {} slots{}",
             ring, S, lengths.defined() ? "" : " without lengths");
  Tensor out = Tensor::empty({B, Hq, 1, value_codec.dim}, q.dtype(), q.device());
  const Tensor len = lengths.defined() ? lengths.contiguous() : lengths;
  if (q.device().is_cuda()) {
    TERN_CHECK(!key_codec.rotated() || cuda::kv_decode_reads_rotated_keys(),
               "[kv-quant] expected keys of 8 bits for the fused decode attention on CUDA, got TurboQuant keys of {} "
               "bits (kv_window_attention reads them there when TERN_CUDA_KV_ROTATED_KEYS=0)",
               key_codec.bits);
    cuda::kv_decode_attention(q, k_rows, device_codec(key_codec), v_rows, value_codec, k_new, v_new, scale, softcap,
                              len, ring, out, keys, values);
  } else {
    if (keys) kv_encode_positions(k_new, key_codec, *keys, v_new, value_codec, *values, len, 0);
    cpu::kv_decode_attention(q, k_rows, key_codec, v_rows, value_codec, k_new, v_new, scale, softcap, len, ring, out);
  }
  return out;
}
}  // namespace

Tensor kv_decode_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                           const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                           float softcap, const Tensor& lengths, int64_t ring) {
  return decode_attention(q, k_rows, key_codec, v_rows, value_codec, k_new, v_new, scale, softcap, lengths, ring,
                          nullptr, nullptr);
}

Tensor kv_decode_attention_store(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                                 const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                                 float softcap, const Tensor& lengths, Tensor& keys, Tensor& values) {
  TERN_CHECK(k_new.defined() && v_new.defined() && lengths.defined(),
             "[kv-quant] expected the step's k_new, v_new and lengths for a read with its store, got {}{}{}",
             k_new.defined() ? "" : "no k_new ", v_new.defined() ? "" : "no v_new ", lengths.defined() ? "" : "no lengths");
  check_step_store(k_new, key_codec, keys, v_new, value_codec, values, lengths, 0);
  return decode_attention(q, k_rows, key_codec, v_rows, value_codec, k_new, v_new, scale, softcap, lengths, 0, &keys,
                          &values);
}

}  // namespace tern::ops
