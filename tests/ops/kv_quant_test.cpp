// Quantized KV row ops on the CPU: encode/decode against the row codecs one row at a time (layout
// [L, B, H] of rows), the decode attention against a naive dequantise-then-attend reference in
// double precision (values decoded to their own domain: the op's rotated read must agree), and the
// window attention against decode-then-sdpa under the causal and sliding-window masks.
#include "tern/ops/kv_quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tern/ops/affine_codec.h"
#include "tern/ops/attention.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/turboquant.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using ops::KVRowCodec;

Tensor randn(const Shape& shape, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

std::vector<KVRowCodec> codecs(int64_t dim) {
  std::vector<KVRowCodec> c;
  for (int bits : {4, 8})
    for (int64_t g : {32, 64, 128})
      if (dim % g == 0) c.push_back({KVRowCodec::affine, bits, g, dim});
  for (int bits : {8, 4, 3}) c.push_back({KVRowCodec::turbo_key, bits, 32, dim});
  for (int bits : {2, 3, 4, 8}) c.push_back({KVRowCodec::turbo_value, bits, 32, dim});
  return c;
}

// Keys of 4 or 3 bits are TurboQuant_mse: the value codec's rows.
void encode_one(const KVRowCodec& c, const float* x, uint8_t* out) {
  if (c.kind == KVRowCodec::affine) AffineRowCodec{c.bits, c.group, c.dim}.encode(x, out);
  else if (c.kind == KVRowCodec::turbo_key && c.bits == 8)
    turboquant::encode_key(x, c.dim, out);
  else turboquant::encode_value(x, c.dim, c.bits, out);
}

void decode_one(const KVRowCodec& c, const uint8_t* in, float* x) {
  if (c.kind == KVRowCodec::affine) AffineRowCodec{c.bits, c.group, c.dim}.decode(in, x);
  else if (c.kind == KVRowCodec::turbo_key && c.bits == 8)
    turboquant::decode_key(in, c.dim, x);
  else turboquant::decode_value(in, c.dim, c.bits, x);
}

TEST(KVQuant, EncodeLaysOutCodecRowsPositionMajor) {
  const int64_t B = 2, H = 3, L = 5, D = 64;
  Tensor x = randn({B, H, L, D}, 7);
  for (const KVRowCodec& c : codecs(D)) {
    Tensor rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8);
    ops::kv_encode(ops::cast(x, Dtype::bf16), c, rows);
    Tensor xb = ops::cast(ops::cast(x, Dtype::bf16), Dtype::f32);  // what the op sees
    std::vector<uint8_t> want(c.row_bytes());
    for (int64_t l = 0; l < L; ++l)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          encode_one(c, xb.data<float>() + ((b * H + h) * L + l) * D, want.data());
          const uint8_t* got = rows.data<uint8_t>() + ((l * B + b) * H + h) * c.row_bytes();
          ASSERT_EQ(std::vector<uint8_t>(got, got + c.row_bytes()), want)
              << "kind " << c.kind << " bits " << c.bits << " group " << c.group << " row " << l << "," << b << "," << h;
        }
  }
}

// t [B, H, S, D] encoded as packed rows [S, B, H, row bytes].
Tensor encoded(const Tensor& t, const KVRowCodec& c) {
  Tensor rows = Tensor::empty({t.size(2), t.size(0), t.size(1), c.row_bytes()}, Dtype::u8);
  ops::kv_encode(t, c, rows);
  return rows;
}

std::vector<uint8_t> bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<uint8_t>(c.data<uint8_t>(), c.data<uint8_t>() + c.numel());
}

TEST(KVQuant, EncodedAtPositionsLandWhereTheRowsBelong) {
  const int64_t B = 3, H = 2, N = 6, D = 64;
  const Tensor k = randn({B, H, 1, D}, 13), v = randn({B, H, 1, D}, 14);
  const KVRowCodec kc{KVRowCodec::turbo_key, 8, 32, D}, vc{KVRowCodec::turbo_value, 3, 32, D};
  const int64_t kb = kc.row_bytes(), vb = vc.row_bytes();
  Tensor keys = Tensor::zeros({N, B, H, kb}, Dtype::u8), values = Tensor::zeros({N, B, H, vb}, Dtype::u8);
  Tensor pos = Tensor::empty({B}, Dtype::i32);
  const int32_t at[B] = {4, 0, 5};
  for (int64_t b = 0; b < B; ++b) pos.data<int32_t>()[b] = at[b];
  ops::kv_encode_positions(k, kc, keys, v, vc, values, pos);
  // Each row alone, through the plain encode: row (b, h) must sit at [at[b], b, h] and nothing else moves.
  Tensor kr = Tensor::empty({1, B, H, kb}, Dtype::u8), vr = Tensor::empty({1, B, H, vb}, Dtype::u8);
  ops::kv_encode(k, kc, kr);
  ops::kv_encode(v, vc, vr);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const uint8_t* ks = keys.data<uint8_t>() + ((n * B + b) * H + h) * kb;
        const uint8_t* vs = values.data<uint8_t>() + ((n * B + b) * H + h) * vb;
        if (n == at[b]) {
          EXPECT_EQ(std::memcmp(ks, kr.data<uint8_t>() + (b * H + h) * kb, kb), 0) << "key row " << b << "," << h;
          EXPECT_EQ(std::memcmp(vs, vr.data<uint8_t>() + (b * H + h) * vb, vb), 0) << "value row " << b << "," << h;
        } else {
          EXPECT_EQ(std::count(ks, ks + kb, 0), kb) << "key slot " << n << " of row " << b << " was written";
          EXPECT_EQ(std::count(vs, vs + vb, 0), vb) << "value slot " << n << " of row " << b << " was written";
        }
      }
  // A ring of N slots: row b lands in slot positions[b] % N.
  Tensor ring_keys = Tensor::zeros({N, B, H, kb}, Dtype::u8), ring_values = Tensor::zeros({N, B, H, vb}, Dtype::u8);
  Tensor far = Tensor::empty({B}, Dtype::i32);
  for (int64_t b = 0; b < B; ++b) far.data<int32_t>()[b] = static_cast<int32_t>(at[b] + (b + 1) * 7 * N);
  ops::kv_encode_positions(k, kc, ring_keys, v, vc, ring_values, far, N);
  EXPECT_EQ(bytes(ring_keys), bytes(keys));
  EXPECT_EQ(bytes(ring_values), bytes(values));
  // A position past the storage is refused with the write's message; storage of the wrong row size by name.
  pos.data<int32_t>()[1] = static_cast<int32_t>(N);
  try {
    ops::kv_encode_positions(k, kc, keys, v, vc, values, pos);
    ADD_FAILURE() << "expected a throw for position " << N << " of " << N;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, " + std::to_string(N) + ")"), std::string::npos) << e.what();
  }
  Tensor bad = Tensor::zeros({N, B, H, 7}, Dtype::u8);
  try {
    ops::kv_encode_positions(k, kc, keys, v, vc, bad, pos);
    ADD_FAILURE() << "expected a throw for value storage of 7-byte rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("value storage rows of " + std::to_string(vb) + " bytes, got 7"),
              std::string::npos)
        << e.what();
  }
}

TEST(KVQuant, DecodeMatchesCodecAndRotatedReadStaysRotated) {
  const int64_t B = 1, H = 2, L = 3, D = 128;
  Tensor x = randn({B, H, L, D}, 8);
  for (const KVRowCodec& c : codecs(D)) {
    Tensor rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8);
    ops::kv_encode(x, c, rows);
    Tensor y = ops::kv_decode(rows, c, Dtype::f32);
    Tensor r = ops::kv_decode(rows, c, Dtype::f32, false);
    ASSERT_EQ(y.shape(), Shape({B, H, L, D}));
    std::vector<float> want(D), rot(D);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) {
        const uint8_t* row = rows.data<uint8_t>() + (l * H + h) * c.row_bytes();
        decode_one(c, row, want.data());
        if (c.rotated())
          turboquant::decode_rotated_value(row, D, c.bits, rot.data());
        else rot = want;
        for (int64_t i = 0; i < D; ++i) {
          ASSERT_EQ(y.data<float>()[(h * L + l) * D + i], want[i]);
          ASSERT_EQ(r.data<float>()[(h * L + l) * D + i], rot[i]);
        }
      }
  }
}

// kv_decode_into positions [0, L) of a longer buffer, and a view whose rows are not one after another:
// what kv_decode gives, the rest untouched; a destination of the wrong shape or dtype is refused with
// what it expected.
TEST(KVQuant, DecodeIntoALongerBufferLeavesTheRest) {
  const int64_t B = 2, H = 2, L = 5, T = 3, D = 64;
  Tensor x = randn({B, H, L, D}, 12);
  for (const KVRowCodec& c : codecs(D)) {
    Tensor rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8);
    ops::kv_encode(x, c, rows);
    for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
      const Tensor fill = ops::cast(randn({B, H, L + T, D}, 13), dt);
      Tensor buf = fill.contiguous().clone();
      Tensor head = buf.narrow(2, 0, L);
      ops::kv_decode_into(rows, c, head);
      const std::vector<float> want = ops::kv_decode(rows, c, dt).to_f32_vector();
      const std::vector<float> got = buf.narrow(2, 0, L).contiguous().to_f32_vector();
      EXPECT_EQ(got, want) << "kind " << c.kind << " bits " << c.bits;
      EXPECT_EQ(buf.narrow(2, L, T).contiguous().to_f32_vector(), fill.narrow(2, L, T).contiguous().to_f32_vector());
    }
  }
  const KVRowCodec c{KVRowCodec::affine, 8, 64, D};
  Tensor rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8);
  ops::kv_encode(x, c, rows);
  Tensor wide = Tensor::zeros({B, H, L, 2 * D}, Dtype::f32);
  Tensor strided = wide.narrow(3, 0, D);
  ops::kv_decode_into(rows, c, strided);
  EXPECT_EQ(strided.contiguous().to_f32_vector(), ops::kv_decode(rows, c, Dtype::f32).to_f32_vector());
  EXPECT_EQ(wide.narrow(3, D, D).contiguous().to_f32_vector(), std::vector<float>(B * H * L * D, 0.0f));
  for (Tensor bad : {Tensor::empty({B, H, L + 1, D}, Dtype::f32), Tensor::empty({B, H, L, D}, Dtype::i32)}) {
    try {
      ops::kv_decode_into(rows, c, bad);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected a float out [2, 2, 5, 64]"), std::string::npos) << e.what();
    }
  }
}

// softmax(q k^T * scale) v over decoded keys and own-domain values, then the unquantized new position.
std::vector<double> naive_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& kc, const Tensor& v_rows,
                                    const KVRowCodec& vc, const Tensor& k_new, const Tensor& v_new, float scale) {
  const int64_t B = q.size(0), Hq = q.size(1), D = q.size(3), S = k_rows.size(0), Hkv = k_rows.size(2);
  const int64_t T = k_new.defined() ? 1 : 0;
  std::vector<double> out(B * Hq * D, 0.0);
  std::vector<float> kx(D), vx(D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      const float* qp = q.data<float>() + (b * Hq + h) * D;
      std::vector<double> s(S + T);
      std::vector<std::vector<float>> vals(S + T);
      for (int64_t j = 0; j < S + T; ++j) {
        if (j < S) {
          decode_one(kc, k_rows.data<uint8_t>() + ((j * B + b) * Hkv + hk) * kc.row_bytes(), kx.data());
          decode_one(vc, v_rows.data<uint8_t>() + ((j * B + b) * Hkv + hk) * vc.row_bytes(), vx.data());
        } else {
          for (int64_t i = 0; i < D; ++i) {
            kx[i] = k_new.data<float>()[(b * Hkv + hk) * D + i];
            vx[i] = v_new.data<float>()[(b * Hkv + hk) * D + i];
          }
        }
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(qp[i]) * kx[i];
        s[j] = d * scale;
        vals[j] = vx;
      }
      double mx = -1e300, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < S + T; ++j)
        for (int64_t i = 0; i < D; ++i) out[(b * Hq + h) * D + i] += s[j] / sum * vals[j][i];
    }
  return out;
}

TEST(KVQuant, DecodeAttentionMatchesNaiveDequantiseThenAttend) {
  struct Case { int64_t B, Hq, Hkv, S, D; bool with_new; };
  for (const Case& cs : {Case{1, 4, 4, 37, 64, true}, Case{2, 8, 2, 100, 128, true}, Case{1, 2, 1, 9, 64, false},
                         Case{2, 4, 1, 0, 64, true}}) {
    const KVRowCodec pairs[][2] = {
        {{KVRowCodec::affine, 8, 64, cs.D}, {KVRowCodec::affine, 8, 64, cs.D}},
        {{KVRowCodec::affine, 4, 32, cs.D}, {KVRowCodec::affine, 4, 32, cs.D}},
        {{KVRowCodec::turbo_key, 8, 32, cs.D}, {KVRowCodec::turbo_value, 3, 32, cs.D}},
        {{KVRowCodec::turbo_key, 8, 32, cs.D}, {KVRowCodec::turbo_value, 8, 32, cs.D}},
        {{KVRowCodec::turbo_key, 4, 32, cs.D}, {KVRowCodec::turbo_value, 4, 32, cs.D}},
        {{KVRowCodec::turbo_key, 3, 32, cs.D}, {KVRowCodec::affine, 8, 64, cs.D}},
    };
    for (const auto& p : pairs) {
      Tensor k = randn({cs.B, cs.Hkv, cs.S, cs.D}, 11), v = randn({cs.B, cs.Hkv, cs.S, cs.D}, 12);
      Tensor kr = Tensor::empty({cs.S, cs.B, cs.Hkv, p[0].row_bytes()}, Dtype::u8);
      Tensor vr = Tensor::empty({cs.S, cs.B, cs.Hkv, p[1].row_bytes()}, Dtype::u8);
      ops::kv_encode(k, p[0], kr);
      ops::kv_encode(v, p[1], vr);
      Tensor q = randn({cs.B, cs.Hq, 1, cs.D}, 13);
      Tensor kn, vn;
      if (cs.with_new) kn = randn({cs.B, cs.Hkv, 1, cs.D}, 14), vn = randn({cs.B, cs.Hkv, 1, cs.D}, 15);
      const float scale = 1.0f / std::sqrt(float(cs.D));
      Tensor got = ops::kv_decode_attention(q, kr, p[0], vr, p[1], kn, vn, scale);
      ASSERT_EQ(got.shape(), Shape({cs.B, cs.Hq, 1, cs.D}));
      std::vector<double> want = naive_attention(q, kr, p[0], vr, p[1], kn, vn, scale);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got.data<float>()[i], want[i], 2e-5) << "S " << cs.S << " value kind " << p[1].kind << " at " << i;
    }
  }
}

// Per-row lengths and a soft cap: each batch row's answer is the decode-then-attend composition over
// its own first lengths[b] rows plus the new position (rows of length 0 read the new one alone).
TEST(KVQuant, DecodeAttentionWithLengthsAndSoftcapMatchesDecodeThenSdpa) {
  const int64_t B = 3, Hq = 6, Hkv = 2, S = 150, D = 64;
  const std::vector<int32_t> lens = {150, 0, 77};
  const KVRowCodec pairs[][2] = {
      {{KVRowCodec::turbo_key, 8, 32, D}, {KVRowCodec::turbo_value, 3, 32, D}},
      {{KVRowCodec::affine, 4, 32, D}, {KVRowCodec::affine, 4, 32, D}},
  };
  for (const auto& p : pairs) {
    Tensor k = randn({B, Hkv, S, D}, 21), v = randn({B, Hkv, S, D}, 22);
    Tensor kr = encoded(k, p[0]), vr = encoded(v, p[1]);
    Tensor q = randn({B, Hq, 1, D}, 23), kn = randn({B, Hkv, 1, D}, 24), vn = randn({B, Hkv, 1, D}, 25);
    const float scale = 1.0f / std::sqrt(float(D)), softcap = 2.5f;
    Tensor got = ops::kv_decode_attention(q, kr, p[0], vr, p[1], kn, vn, scale, softcap,
                                          Tensor::from_vector(lens, {B}));
    ASSERT_EQ(got.shape(), Shape({B, Hq, 1, D}));
    ops::AttentionMask none;
    none.causal = false;
    for (int64_t b = 0; b < B; ++b) {
      Tensor kb = kn.narrow(0, b, 1).contiguous(), vb = vn.narrow(0, b, 1).contiguous();
      if (lens[b] > 0) {
        Tensor krb = kr.narrow(0, 0, lens[b]).narrow(1, b, 1).contiguous();
        Tensor vrb = vr.narrow(0, 0, lens[b]).narrow(1, b, 1).contiguous();
        kb = ops::concat({ops::kv_decode(krb, p[0], Dtype::f32), kb}, 2);
        vb = ops::concat({ops::kv_decode(vrb, p[1], Dtype::f32), vb}, 2);
      }
      Tensor want = ops::sdpa(q.narrow(0, b, 1).contiguous(), kb, vb, scale, none, softcap).contiguous();
      Tensor row = got.narrow(0, b, 1).contiguous();
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(row.data<float>()[i], want.data<float>()[i], 2e-5) << "row " << b << " value kind " << p[1].kind
                                                                        << " at " << i;
    }
  }
}

// A compiled step's read with its store folded in (kv_decode_attention_store): the same output as the read
// alone and the same storage as kv_encode_positions, for a new position past the read's span, one inside
// it (which its own row does not read) and an empty row.
TEST(KVQuant, DecodeAttentionWithTheStepsStoreEqualsEncodeThenRead) {
  const int64_t B = 3, Hq = 8, Hkv = 2, N = 40, S = 32, D = 64;
  const std::vector<int32_t> lens = {32, 0, 17};
  const KVRowCodec pairs[][2] = {
      {{KVRowCodec::turbo_key, 8, 32, D}, {KVRowCodec::turbo_value, 3, 32, D}},
      {{KVRowCodec::affine, 4, 32, D}, {KVRowCodec::affine, 4, 32, D}},
  };
  const Tensor len = Tensor::from_vector(lens, {B});
  for (const auto& p : pairs) {
    const Tensor keys = encoded(randn({B, Hkv, N, D}, 41), p[0]), values = encoded(randn({B, Hkv, N, D}, 42), p[1]);
    const Tensor q = randn({B, Hq, 1, D}, 43), kn = randn({B, Hkv, 1, D}, 44), vn = randn({B, Hkv, 1, D}, 45);
    const float scale = 1.0f / std::sqrt(float(D));
    Tensor keys_a = keys.clone(), values_a = values.clone();
    ops::kv_encode_positions(kn, p[0], keys_a, vn, p[1], values_a, len);
    const Tensor want = ops::kv_decode_attention(q, keys.narrow(0, 0, S), p[0], values.narrow(0, 0, S), p[1], kn, vn,
                                                 scale, 0.0f, len);
    Tensor keys_b = keys.clone(), values_b = values.clone();
    const Tensor got = ops::kv_decode_attention_store(q, keys_b.narrow(0, 0, S), p[0], values_b.narrow(0, 0, S), p[1],
                                                      kn, vn, scale, 0.0f, len, keys_b, values_b);
    EXPECT_EQ(std::memcmp(want.data_ptr(), got.data_ptr(), want.nbytes()), 0) << "value kind " << p[1].kind;
    EXPECT_EQ(bytes(keys_b), bytes(keys_a)) << "value kind " << p[1].kind;
    EXPECT_EQ(bytes(values_b), bytes(values_a)) << "value kind " << p[1].kind;
  }
  // No lengths: refused by name.
  Tensor keys = encoded(randn({B, Hkv, N, D}, 46), pairs[0][0]), values = encoded(randn({B, Hkv, N, D}, 47), pairs[0][1]);
  try {
    ops::kv_decode_attention_store(randn({B, Hq, 1, D}, 48), keys.narrow(0, 0, S), pairs[0][0], values.narrow(0, 0, S),
                                   pairs[0][1], randn({B, Hkv, 1, D}, 49), randn({B, Hkv, 1, D}, 50), 0.125f, 0.0f,
                                   Tensor(), keys, values);
    ADD_FAILURE() << "expected a throw without lengths";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no lengths"), std::string::npos) << e.what();
  }
}

// A ring's compiled step: the S stored rows are slots of a ring of W (position p in slot p % W), and
// lengths[b] is row b's new position. Each row reads the slots [0, min(lengths[b], S)) but slot
// lengths[b] % W, plus the new position: the decode-then-sdpa composition over exactly those slots.
TEST(KVQuant, RingDecodeAttentionSkipsTheSlotOfTheNewPosition) {
  const int64_t B = 5, Hq = 4, Hkv = 2, W = 40, D = 64;
  // Before the wrap (3, 39: the skipped slot is past the held ones), at it (40: slot 0), after it
  // (57: slot 17; 1,000,003: slot 3); W slots are allocated.
  const std::vector<int32_t> pos = {3, 39, 40, 57, 1000003};
  const KVRowCodec pairs[][2] = {
      {{KVRowCodec::affine, 8, 64, D}, {KVRowCodec::affine, 8, 64, D}},
      {{KVRowCodec::affine, 4, 32, D}, {KVRowCodec::affine, 4, 32, D}},
      {{KVRowCodec::turbo_key, 8, 32, D}, {KVRowCodec::turbo_value, 3, 32, D}},
  };
  for (const auto& p : pairs) {
    Tensor k = randn({B, Hkv, W, D}, 31), v = randn({B, Hkv, W, D}, 32);
    Tensor kr = encoded(k, p[0]), vr = encoded(v, p[1]);
    Tensor q = randn({B, Hq, 1, D}, 33), kn = randn({B, Hkv, 1, D}, 34), vn = randn({B, Hkv, 1, D}, 35);
    const float scale = 1.0f / std::sqrt(float(D));
    Tensor got = ops::kv_decode_attention(q, kr, p[0], vr, p[1], kn, vn, scale, 0.0f, Tensor::from_vector(pos, {B}), W);
    ops::AttentionMask none;
    none.causal = false;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<Tensor> ks, vs;
      for (int64_t j = 0; j < std::min<int64_t>(pos[b], W); ++j) {
        if (j == pos[b] % W) continue;
        ks.push_back(ops::kv_decode(kr.narrow(0, j, 1).narrow(1, b, 1).contiguous(), p[0], Dtype::f32));
        vs.push_back(ops::kv_decode(vr.narrow(0, j, 1).narrow(1, b, 1).contiguous(), p[1], Dtype::f32));
      }
      ASSERT_EQ(static_cast<int64_t>(ks.size()), std::min<int64_t>(pos[b], W - 1)) << "row " << b;
      ks.push_back(kn.narrow(0, b, 1).contiguous());
      vs.push_back(vn.narrow(0, b, 1).contiguous());
      Tensor want = ops::sdpa(q.narrow(0, b, 1).contiguous(), ops::concat(ks, 2), ops::concat(vs, 2), scale, none)
                        .contiguous();
      Tensor row = got.narrow(0, b, 1).contiguous();
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(row.data<float>()[i], want.data<float>()[i], 2e-5) << "row " << b << " value kind " << p[1].kind
                                                                        << " at " << i;
    }
  }
  // The ring needs lengths and at most W stored slots.
  const KVRowCodec c{KVRowCodec::affine, 8, 64, D};
  Tensor rows = Tensor::zeros({W, 1, Hkv, c.row_bytes()}, Dtype::u8);
  EXPECT_THROW(ops::kv_decode_attention(randn({1, Hq, 1, D}, 1), rows, c, rows, c, Tensor(), Tensor(), 1.0f, 0.0f,
                                        Tensor(), W),
               Error);
  EXPECT_THROW(ops::kv_decode_attention(randn({1, Hq, 1, D}, 1), rows, c, rows, c, Tensor(), Tensor(), 1.0f, 0.0f,
                                        Tensor::from_vector(std::vector<int32_t>{5}, {1}), W - 1),
               Error);
}

// A window of L queries over S packed positions plus the L appended ones: the decode-then-sdpa
// composition under the causal mask (and a sliding window), for windows longer than the op's query
// tile, GQA, a soft cap, an empty prefix, and both TurboQuant reads (rotated, or decoded values).
TEST(KVQuant, WindowAttentionMatchesDecodeThenMaskedSdpa) {
  struct Case {
    int64_t B, Hq, Hkv, S, L, D, window;
    float softcap;
  };
  for (const Case& cs :
       {Case{1, 4, 2, 37, 9, 64, 0, 0.0f}, Case{2, 6, 2, 150, 70, 64, 0, 3.0f}, Case{1, 4, 1, 0, 20, 128, 0, 0.0f},
        Case{2, 4, 2, 15, 40, 64, 16, 0.0f}, Case{1, 2, 2, 300, 130, 32, 100, 0.0f}}) {
    const KVRowCodec pairs[][2] = {
        {{KVRowCodec::affine, 8, 32, cs.D}, {KVRowCodec::affine, 8, 32, cs.D}},
        {{KVRowCodec::affine, 4, 32, cs.D}, {KVRowCodec::affine, 4, 32, cs.D}},
        {{KVRowCodec::turbo_key, 8, 32, cs.D}, {KVRowCodec::turbo_value, 3, 32, cs.D}},
        {{KVRowCodec::turbo_key, 4, 32, cs.D}, {KVRowCodec::turbo_value, 4, 32, cs.D}},
    };
    for (const auto& p : pairs)
      for (bool deferred : {false, true}) {
        Tensor k = randn({cs.B, cs.Hkv, cs.S, cs.D}, 31), v = randn({cs.B, cs.Hkv, cs.S, cs.D}, 32);
        Tensor kr = Tensor::empty({cs.S, cs.B, cs.Hkv, p[0].row_bytes()}, Dtype::u8);
        Tensor vr = Tensor::empty({cs.S, cs.B, cs.Hkv, p[1].row_bytes()}, Dtype::u8);
        ops::kv_encode(k, p[0], kr);
        ops::kv_encode(v, p[1], vr);
        Tensor q = randn({cs.B, cs.Hq, cs.L, cs.D}, 33);
        Tensor kn = randn({cs.B, cs.Hkv, cs.L, cs.D}, 34), vn = randn({cs.B, cs.Hkv, cs.L, cs.D}, 35);
        const float scale = 1.0f / std::sqrt(float(cs.D));
        Tensor got = ops::kv_window_attention(q, kr, p[0], vr, p[1], kn, vn, scale, cs.softcap, cs.window, deferred);
        ASSERT_EQ(got.shape(), Shape({cs.B, cs.Hq, cs.L, cs.D}));
        Tensor kw = kn, vw = vn;
        if (cs.S > 0) {
          kw = ops::concat({ops::kv_decode(kr, p[0], Dtype::f32), kn}, 2);
          vw = ops::concat({ops::kv_decode(vr, p[1], Dtype::f32), vn}, 2);
        }
        ops::AttentionMask mask;
        mask.causal = true;
        mask.q_offset = cs.S;
        mask.window = cs.window;
        Tensor want = ops::sdpa(q, kw, vw, scale, mask, cs.softcap).contiguous();
        double worst = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          worst = std::max(worst, std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]));
        EXPECT_LT(worst, 2e-5) << "S " << cs.S << " L " << cs.L << " window " << cs.window << " value kind "
                               << p[1].kind << " deferred " << deferred;
      }
  }
}

// Which pairs the fused decode read takes (a cache reads the others' decode appends as windows): every
// pair on the CPU; on CUDA one head dim of 32-512 for keys and values, and TurboQuant keys of 4 or 3
// bits unless TERN_CUDA_KV_ROTATED_KEYS=0 (and never in a CPU-only build). Likewise a ring's steps.
TEST(KVQuant, DecodeAttentionSupportedByDevice) {
  const Device gpu = Device::cuda(0);
  const KVRowCodec a128{KVRowCodec::affine, 8, 32, 128}, a96{KVRowCodec::affine, 8, 32, 96};
  const KVRowCodec k4{KVRowCodec::turbo_key, 4, 32, 128}, v4{KVRowCodec::turbo_value, 4, 32, 128};
  for (const auto& [kc, vc] : {std::pair{a128, a128}, std::pair{a96, a96}, std::pair{a128, a96}, std::pair{k4, v4}})
    EXPECT_TRUE(ops::kv_decode_attention_supported(kc, vc, Device::cpu()));
  EXPECT_TRUE(ops::kv_decode_attention_supported(a128, a128, gpu));
  EXPECT_FALSE(ops::kv_decode_attention_supported(a96, a96, gpu));
  EXPECT_FALSE(ops::kv_decode_attention_supported(a128, a96, gpu));
  // A ring's compiled step: always on the CPU, on CUDA unless TERN_CUDA_KV_RING_STEPS=0.
  EXPECT_TRUE(ops::kv_ring_steps_supported(Device::cpu()));
  // Switched off: the variables are read per call.
  cuda_test::ScopedEnv rotated("TERN_CUDA_KV_ROTATED_KEYS", "0"), ring("TERN_CUDA_KV_RING_STEPS", "0");
  EXPECT_FALSE(ops::kv_decode_attention_supported(k4, v4, gpu));
  EXPECT_TRUE(ops::kv_decode_attention_supported(k4, v4, Device::cpu()));
  EXPECT_FALSE(ops::kv_ring_steps_supported(gpu));
  EXPECT_TRUE(ops::kv_ring_steps_supported(Device::cpu()));
}

TEST(KVQuant, RejectsBadCodecsAndShapes) {
  EXPECT_THROW((KVRowCodec{KVRowCodec::affine, 3, 64, 64}.row_bytes()), Error);
  EXPECT_THROW((KVRowCodec{KVRowCodec::affine, 4, 64, 96}.row_bytes()), Error);
  EXPECT_THROW((KVRowCodec{KVRowCodec::turbo_value, 5, 32, 64}.row_bytes()), Error);
  EXPECT_THROW((KVRowCodec{KVRowCodec::turbo_value, 4, 32, 96}.row_bytes()), Error);
  const KVRowCodec c{KVRowCodec::affine, 8, 64, 64};
  Tensor rows = Tensor::empty({3, 1, 2, c.row_bytes() + 1}, Dtype::u8);
  EXPECT_THROW(ops::kv_encode(randn({1, 2, 3, 64}, 1), c, rows), Error);
  Tensor empty_rows = Tensor::empty({0, 1, 2, c.row_bytes()}, Dtype::u8);
  EXPECT_THROW(ops::kv_decode_attention(randn({1, 2, 1, 64}, 1), empty_rows, c, empty_rows, c, Tensor(), Tensor(), 1.0f),
               Error);
  // A window needs its own L keys and values, and a non-negative window.
  EXPECT_THROW(
      ops::kv_window_attention(randn({1, 2, 3, 64}, 1), empty_rows, c, empty_rows, c, Tensor(), Tensor(), 1.0f), Error);
  EXPECT_THROW(ops::kv_window_attention(randn({1, 2, 3, 64}, 1), empty_rows, c, empty_rows, c, randn({1, 2, 2, 64}, 2),
                                        randn({1, 2, 2, 64}, 3), 1.0f),
               Error);
  EXPECT_THROW(ops::kv_window_attention(randn({1, 2, 3, 64}, 1), empty_rows, c, empty_rows, c, randn({1, 2, 3, 64}, 2),
                                        randn({1, 2, 3, 64}, 3), 1.0f, 0.0f, -1),
               Error);
}

}  // namespace
}  // namespace tern
