// CPU quantized KV rows: every row through the shared codecs (tern/ops/affine_codec.h,
// tern/ops/turboquant.h), the reference the CUDA kernels are checked against bit for bit, and the
// attention that reads them block by block (a decode step, or a window of queries over a packed prefix).
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
    case ops::KVRowCodec::turbo_key:
      if (c.bits == 8)
        turboquant::encode_key(x, c.dim, out);
      else
        turboquant::encode_value(x, c.dim, c.bits, out);  // TurboQuant_mse: coded as values are
      return;
    case ops::KVRowCodec::turbo_value: turboquant::encode_value(x, c.dim, c.bits, out); return;
  }
}

void decode_row(const ops::KVRowCodec& c, bool unrotate, const uint8_t* in, float* x) {
  switch (c.kind) {
    case ops::KVRowCodec::affine: AffineRowCodec{c.bits, c.group, c.dim}.decode(in, x); return;
    case ops::KVRowCodec::turbo_key:
      if (c.bits == 8) {
        turboquant::decode_key(in, c.dim, x);
        return;
      }
      [[fallthrough]];
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

namespace {

// Attention of q [B, Hq, L, D] over a sequence of len[b] packed positions (k_rows / v_rows) followed by
// T unquantized ones (kn / vn [B, Hkv, T, D] f32, T = 0 or L): query i sees positions [lo_i, hi_i) with
// hi_i = len[b] + T - (L - 1 - i) and lo_i = max(0, hi_i - window) (0 without a window). Work items are
// (batch row, kv head, query tile, key split); each decodes the key blocks its tile sees once for all
// its G * tile query rows. TurboQuant values are attended rotated and each output row rotated back when
// `rotated`, else decoded to their own domain. skip (empty, or one per batch row): a stored position
// that row does not see (-1: none).
void packed_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& kc, const Tensor& v_rows,
                      const ops::KVRowCodec& vc, const Tensor& kn, const Tensor& vn, float scale, float softcap,
                      const std::vector<int64_t>& len, int64_t window, bool rotated_read, Tensor& out,
                      const std::vector<int64_t>& skip = {}) {
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), Hkv = k_rows.size(2), D = kc.dim, Dv = vc.dim;
  const int64_t G = Hq / Hkv, T = kn.defined() ? kn.size(2) : 0, krb = k_rows.size(3), vrb = v_rows.size(3);
  const bool rotated = rotated_read && vc.rotated();
  const bool rotated_keys = kc.rotated();  // scores in the rotated domain: q rotated once per row
  auto hi_of = [&](int64_t b, int64_t i) { return len[b] + T - (L - 1 - i); };
  auto lo_of = [&](int64_t b, int64_t i) { return window > 0 ? std::max<int64_t>(0, hi_of(b, i) - window) : 0; };
  for (int64_t b = 0; b < B; ++b)
    TERN_CHECK(hi_of(b, 0) > 0, "[kv-quant] expected batch row {} to attend to at least one position, got none", b);
  // Query positions per work item: up to 2,048 query rows (G per position), so a prefill chunk's tile
  // decodes each packed row once or a few times (decoding per 64-row tile, as sdpa blocks its queries,
  // measured 0.73x the decode-then-sdpa read on the demo model). Rows decoded per block: 64 for a
  // decode step; for a window, as sdpa's key blocks (K and V in f32 within 16 KiB, in L1 for every row).
  const int64_t kTile = std::clamp<int64_t>(2048 / G, 1, L);
  const int64_t kKeys = L == 1 ? 64 : std::clamp<int64_t>(4096 / (D + Dv) / 8 * 8, 8, 128);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t tiles = (L + kTile - 1) / kTile;
  // Key splits keep every thread busy when B * Hkv * tiles is small (a decode step).
  int64_t longest = 0;
  for (int64_t b = 0; b < B; ++b) longest = std::max(longest, hi_of(b, L - 1) - lo_of(b, 0));
  const int64_t units = B * Hkv * tiles;
  const int64_t splits =
      std::clamp<int64_t>((2 * num_threads() + units - 1) / units, 1, std::max<int64_t>(1, longest / 256));
  // Per (batch row, kv head, split) and query row (g, i): m, l, acc[Dv].
  const int64_t stride = Dv + 2;
  std::vector<float> part(B * Hkv * splits * G * L * stride);
  const float* qp = q.data<float>();
  const uint8_t* kp = k_rows.data<uint8_t>();
  const uint8_t* vp = v_rows.data<uint8_t>();
  parallel_for(units * splits, 1, [&](int64_t lo, int64_t hi) {
    // The item's rows (g, i) accumulate in m, l and acc (rows of Dv, aligned as sdpa's), then go to part.
    std::vector<float> kbuf(kKeys * D), vbuf(kKeys * Dv), qs(G * kTile * D), s(kKeys);
    std::vector<float> m(G * kTile), l(G * kTile), acc(G * kTile * Dv);
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t sp = item % splits, qt = item / splits % tiles, h = item / (splits * tiles) % Hkv;
      const int64_t b = item / (splits * tiles * Hkv);
      const int64_t i0 = qt * kTile, i1 = std::min(L, i0 + kTile), rows = i1 - i0;
      // The keys the tile sees, cut into `splits` equal runs.
      const int64_t first = lo_of(b, i0), last = hi_of(b, i1 - 1), chunk = (last - first + splits - 1) / splits;
      const int64_t j0 = std::min(last, first + sp * chunk), j1 = std::min(last, j0 + chunk);
      std::fill_n(m.begin(), G * rows, kNegInf);
      std::fill_n(l.begin(), G * rows, 0.0f);
      std::fill_n(acc.begin(), G * rows * Dv, 0.0f);
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = i0; i < i1; ++i) {
          const float* qr = qp + ((b * Hq + h * G + g) * L + i) * D;
          float* qd = qs.data() + (g * rows + i - i0) * D;
          for (int64_t c = 0; c < D; ++c) qd[c] = qr[c] * scale;
          if (rotated_keys) turboquant::rotate(qd, D);
        }
      for (int64_t a = j0; a < j1; a += kKeys) {
        const int64_t e = std::min(j1, a + kKeys);
        for (int64_t j = a; j < e; ++j) {  // stored rows, then the appended positions
          float* kd = kbuf.data() + (j - a) * D;
          float* vd = vbuf.data() + (j - a) * Dv;
          if (j < len[b]) {
            decode_row(kc, false, kp + ((j * B + b) * Hkv + h) * krb, kd);
            decode_row(vc, !rotated, vp + ((j * B + b) * Hkv + h) * vrb, vd);
          } else {
            const int64_t t = j - len[b];
            std::copy_n(kn.data<float>() + ((b * Hkv + h) * T + t) * D, D, kd);
            std::copy_n(vn.data<float>() + ((b * Hkv + h) * T + t) * Dv, Dv, vd);
            if (rotated_keys) turboquant::rotate(kd, D);
            if (rotated) turboquant::rotate(vd, Dv);  // the read attends in the rotated domain
          }
        }
        const int64_t skipped = skip.empty() ? -1 : skip[b];
        for (int64_t g = 0; g < G; ++g)
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t r = g * rows + i - i0;
            // Keys [x0, x1) of the block; a skipped position splits them in two runs.
            auto attend = [&](int64_t x0, int64_t x1) {
              if (x0 >= x1) return;
              detail::scores(qs.data() + r * D, kbuf.data() + (x0 - a) * D, D, x1 - x0, D, s.data());
              if (softcap > 0.0f) detail::apply_softcap(s.data(), x1 - x0, softcap);
              detail::online_softmax_block(s.data(), x1 - x0, vbuf.data() + (x0 - a) * Dv, Dv, Dv, m[r], l[r],
                                           acc.data() + r * Dv);
            };
            const int64_t x0 = std::max(a, lo_of(b, i)), x1 = std::min(e, hi_of(b, i));
            if (skipped >= x0 && skipped < x1) {
              attend(x0, skipped);
              attend(skipped + 1, x1);
            } else {
              attend(x0, x1);
            }
          }
      }
      float* base = part.data() + ((b * Hkv + h) * splits + sp) * G * L * stride;
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = g * rows + i - i0;
          float* pr = base + (g * L + i) * stride;
          pr[0] = m[r], pr[1] = l[r];
          std::copy_n(acc.data() + r * Dv, Dv, pr + 2);
        }
    }
  });
  // Merge the splits of each query row, then rotate TurboQuant values back.
  Tensor o = Tensor::empty({B, Hq, L, Dv}, Dtype::f32);
  float* op = o.data<float>();
  parallel_for(B * Hq * L, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t qrow = lo; qrow < hi; ++qrow) {
      const int64_t i = qrow % L, hq = qrow / L % Hq, b = qrow / (L * Hq), h = hq / G, g = hq % G;
      auto at = [&](int64_t sp) { return part.data() + (((b * Hkv + h) * splits + sp) * G * L + g * L + i) * stride; };
      float* dst = op + qrow * Dv;
      const float l = detail::merge_splits(splits, Dv, at, dst);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t c = 0; c < Dv; ++c) dst[c] *= inv;
      if (rotated) turboquant::unrotate(dst, Dv);
    }
  });
  out.copy_from(out.dtype() == Dtype::f32 ? o : ops::cast(o, out.dtype()));
}

Tensor as_f32(const Tensor& t) { return (t.dtype() == Dtype::f32 ? t : ops::cast(t, Dtype::f32)).contiguous(); }

}  // namespace

void kv_decode_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& kc, const Tensor& v_rows,
                         const ops::KVRowCodec& vc, const Tensor& k_new, const Tensor& v_new, float scale,
                         float softcap, const Tensor& lengths, int64_t ring, Tensor& out) {
  const int64_t S = k_rows.size(0);
  std::vector<int64_t> len(q.size(0), S), skip;
  if (lengths.defined()) {
    const Tensor l = lengths.contiguous();
    for (size_t b = 0; b < len.size(); ++b) {
      const int64_t n = l.data<int32_t>()[b];
      len[b] = std::clamp<int64_t>(n, 0, S);
      // The stored slot of position n - ring (or of n, once stored); a slot past the stored ones is no key
      // the row reads (and its index is the new position's in [stored ; new]).
      if (ring > 0) skip.push_back(n >= 0 && n % ring < len[b] ? n % ring : -1);
    }
  }
  packed_attention(as_f32(q), k_rows, kc, v_rows, vc, k_new.defined() ? as_f32(k_new) : Tensor(),
                   v_new.defined() ? as_f32(v_new) : Tensor(), scale, softcap, len, 0, true, out, skip);
}

void kv_window_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& kc, const Tensor& v_rows,
                         const ops::KVRowCodec& vc, const Tensor& k_new, const Tensor& v_new, float scale,
                         float softcap, int64_t window, bool deferred, Tensor& out) {
  const std::vector<int64_t> len(q.size(0), k_rows.size(0));
  packed_attention(as_f32(q), k_rows, kc, v_rows, vc, as_f32(k_new), as_f32(v_new), scale, softcap, len, window,
                   deferred, out);
}

}  // namespace tern::cpu
