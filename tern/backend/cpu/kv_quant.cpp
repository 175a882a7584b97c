// CPU quantized KV rows: every row through the shared codecs (tern/ops/affine_codec.h,
// tern/ops/turboquant.h), the reference the CUDA kernels are checked against bit for bit.
#include "tern/ops/kv_quant.h"

#include "tern/base/parallel.h"
#include "tern/ops/affine_codec.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/turboquant.h"

namespace tern::cpu {
namespace {

void encode_row(const ops::KVRowCodec& c, const float* x, uint8_t* out) {
  switch (c.kind) {
    case ops::KVRowCodec::affine: AffineRowCodec{c.bits, c.group, c.dim}.encode(x, out); return;
    case ops::KVRowCodec::turbo_key: turboquant::encode_key(x, c.dim, out); return;
    case ops::KVRowCodec::turbo_value: turboquant::encode_value(x, c.dim, c.bits, out); return;
  }
}

void decode_row(const ops::KVRowCodec& c, bool unrotate, const uint8_t* in, float* x) {
  switch (c.kind) {
    case ops::KVRowCodec::affine: AffineRowCodec{c.bits, c.group, c.dim}.decode(in, x); return;
    case ops::KVRowCodec::turbo_key: turboquant::decode_key(in, c.dim, x); return;
    case ops::KVRowCodec::turbo_value:
      if (unrotate) turboquant::decode_value(in, c.dim, c.bits, x);
      else turboquant::decode_rotated_value(in, c.dim, c.bits, x);
      return;
  }
}

}  // namespace

void kv_encode(const Tensor& x_in, const ops::KVRowCodec& codec, Tensor& rows) {
  const Tensor x = (x_in.dtype() == Dtype::f32 ? x_in : ops::cast(x_in, Dtype::f32)).contiguous();
  const int64_t B = x.size(0), H = x.size(1), L = x.size(2), D = x.size(3), rb = rows.size(3);
  const float* xp = x.data<float>();
  uint8_t* rp = rows.data<uint8_t>();
  // row r = (l * B + b) * H + h holds x[b, h, l, :]
  parallel_for(L * B * H, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t l = r / (B * H), bh = r % (B * H);
      encode_row(codec, xp + (bh * L + l) * D, rp + r * rb);
    }
  });
}

void kv_decode(const Tensor& rows, const ops::KVRowCodec& codec, bool unrotate, Tensor& out) {
  const int64_t S = rows.size(0), B = rows.size(1), H = rows.size(2), rb = rows.size(3), D = codec.dim;
  Tensor o = out.dtype() == Dtype::f32 ? out : Tensor::empty(out.shape(), Dtype::f32);
  const uint8_t* rp = rows.data<uint8_t>();
  float* op = o.data<float>();
  parallel_for(S * B * H, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t l = r / (B * H), bh = r % (B * H);
      decode_row(codec, unrotate, rp + r * rb, op + (bh * S + l) * D);
    }
  });
  if (out.dtype() != Dtype::f32) out.copy_from(ops::cast(o, out.dtype()));
}

}  // namespace tern::cpu
