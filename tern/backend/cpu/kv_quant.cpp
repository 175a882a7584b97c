// CPU quantized KV rows: every row through the shared codecs (tern/ops/affine_codec.h,
// tern/ops/turboquant.h), the reference the CUDA kernels are checked against bit for bit, and the
// decode attention that reads them block by block.
#include "tern/ops/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tern/backend/cpu/attention_kernels.h"
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

void kv_decode_attention(const Tensor& q_in, const Tensor& k_rows, const ops::KVRowCodec& kc, const Tensor& v_rows,
                         const ops::KVRowCodec& vc, const Tensor& k_new, const Tensor& v_new, float scale, float softcap,
                         const Tensor& lengths, Tensor& out) {
  auto f32 = [](const Tensor& t) { return (t.dtype() == Dtype::f32 ? t : ops::cast(t, Dtype::f32)).contiguous(); };
  const Tensor q = f32(q_in), kn = k_new.defined() ? f32(k_new) : Tensor(), vn = v_new.defined() ? f32(v_new) : Tensor();
  const int64_t B = q.size(0), Hq = q.size(1), S = k_rows.size(0), Hkv = k_rows.size(2), D = kc.dim, Dv = vc.dim;
  const int64_t G = Hq / Hkv, T = kn.defined() ? kn.size(2) : 0, krb = k_rows.size(3), vrb = v_rows.size(3);
  const bool rotated = vc.kind == ops::KVRowCodec::turbo_value;
  std::vector<int64_t> len(B, S);
  if (lengths.defined()) {
    const Tensor l = lengths.contiguous();
    for (int64_t b = 0; b < B; ++b) len[b] = std::clamp<int64_t>(l.data<int32_t>()[b], 0, S);
  }
  for (int64_t b = 0; b < B; ++b)
    TERN_CHECK(len[b] + T > 0, "[kv-quant] expected batch row {} to attend to at least one position, got none", b);
  // Work items (batch row, kv head, key split): splits keep every thread busy when B * Hkv is small.
  const int64_t longest = *std::max_element(len.begin(), len.end()) + T;
  const int64_t splits = std::clamp<int64_t>((2 * num_threads() + B * Hkv - 1) / (B * Hkv), 1,
                                             std::max<int64_t>(1, longest / 256));
  constexpr int64_t kKeys = 64;  // rows decoded per block
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Per item and query row: (m, l, acc[Dv]).
  std::vector<float> part(B * Hkv * splits * G * (Dv + 2));
  const float* qp = q.data<float>();
  const uint8_t* kp = k_rows.data<uint8_t>();
  const uint8_t* vp = v_rows.data<uint8_t>();
  parallel_for(B * Hkv * splits, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> kbuf(kKeys * D), vbuf(kKeys * Dv), qs(G * D), s(kKeys), fresh(Dv);
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t b = item / (Hkv * splits), h = item / splits % Hkv, sp = item % splits;
      const int64_t n = len[b] + T, chunk = (n + splits - 1) / splits;
      const int64_t j0 = std::min(n, sp * chunk), j1 = std::min(n, j0 + chunk);
      float* pr = part.data() + item * G * (Dv + 2);  // row r: m, l, acc
      for (int64_t r = 0; r < G; ++r) {
        pr[r * (Dv + 2)] = kNegInf, pr[r * (Dv + 2) + 1] = 0.0f;
        std::fill_n(pr + r * (Dv + 2) + 2, Dv, 0.0f);
        const float* qr = qp + (b * Hq + h * G + r) * D;
        for (int64_t c = 0; c < D; ++c) qs[r * D + c] = qr[c] * scale;
      }
      for (int64_t a = j0; a < j1; a += kKeys) {
        const int64_t e = std::min(j1, a + kKeys);
        for (int64_t j = a; j < e; ++j) {  // stored rows, then the step's own position
          float* kd = kbuf.data() + (j - a) * D;
          float* vd = vbuf.data() + (j - a) * Dv;
          if (j < len[b]) {
            decode_row(kc, false, kp + ((j * B + b) * Hkv + h) * krb, kd);
            decode_row(vc, false, vp + ((j * B + b) * Hkv + h) * vrb, vd);
          } else {
            std::copy_n(kn.data<float>() + (b * Hkv + h) * D, D, kd);
            std::copy_n(vn.data<float>() + (b * Hkv + h) * Dv, Dv, vd);
            if (rotated) turboquant::rotate(vd, Dv);  // the read attends in the rotated domain
          }
        }
        for (int64_t r = 0; r < G; ++r) {
          float* row = pr + r * (Dv + 2);
          detail::scores(qs.data() + r * D, kbuf.data(), D, e - a, D, s.data());
          if (softcap > 0.0f) detail::apply_softcap(s.data(), e - a, softcap);
          detail::online_softmax_block(s.data(), e - a, vbuf.data(), Dv, Dv, row[0], row[1], row + 2);
        }
      }
    }
  });
  // Merge the splits of each query row, then rotate TurboQuant values back.
  Tensor o = Tensor::empty({B, Hq, 1, Dv}, Dtype::f32);
  float* op = o.data<float>();
  parallel_for(B * Hq, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t qrow = lo; qrow < hi; ++qrow) {
      const int64_t b = qrow / Hq, hq = qrow % Hq, h = hq / G, r = hq % G;
      auto at = [&](int64_t sp) { return part.data() + ((b * Hkv + h) * splits + sp) * G * (Dv + 2) + r * (Dv + 2); };
      float* dst = op + qrow * Dv;
      const float l = detail::merge_splits(splits, Dv, at, dst);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t c = 0; c < Dv; ++c) dst[c] *= inv;
      if (rotated) turboquant::unrotate(dst, Dv);
    }
  });
  out.copy_from(out.dtype() == Dtype::f32 ? o : ops::cast(o, out.dtype()));
}

}  // namespace tern::cpu
