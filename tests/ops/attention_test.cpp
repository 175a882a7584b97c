// sdpa against a naive double-precision reference: GQA, causal offsets, windows, per-row key lengths,
// additive bias, softcap, decode with key splits, fully masked rows, strided cache views, errors.
#include "tern/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tern {
namespace {

Tensor random_tensor(const Shape& shape, Dtype dtype, uint32_t seed, float range = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = dist(rng);
    if (dtype == Dtype::f32) t.data<float>()[i] = x;
    if (dtype == Dtype::bf16) t.data<bf16>()[i] = bf16(x);
    if (dtype == Dtype::f16) t.data<f16>()[i] = f16(x);
  }
  return t;
}

double at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t off = i0 * t.stride(0) + i1 * t.stride(1) + i2 * t.stride(2) + i3 * t.stride(3);
  switch (t.dtype()) {
    case Dtype::f32: return t.data<float>()[off];
    case Dtype::bf16: return static_cast<float>(t.data<bf16>()[off]);
    case Dtype::f16: return static_cast<float>(t.data<f16>()[off]);
    default: ADD_FAILURE() << "unexpected dtype"; return 0.0;
  }
}

// The definition, in double: masked softmax of (softcapped) scaled scores plus bias, times v.
std::vector<double> reference(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                              const ops::AttentionMask& mask, float softcap) {
  const int64_t B = q.size(0), Hq = q.size(1), Lq = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), Lk = k.size(2), Dv = v.size(3);
  Tensor bias = mask.bias.defined() ? mask.bias.broadcast_to({B, Hq, Lq, Lk}) : Tensor();
  std::vector<double> out(B * Hq * Lq * Dv, 0.0), s(Lk);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = mask.kv_len.defined() ? mask.kv_len.data<int32_t>()[b] : Lk;
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        const int64_t pos = i + mask.q_offset;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < Lk; ++j) {
          const bool visible = (!mask.causal || j <= pos) && (mask.window <= 0 || j > pos - mask.window) && j < len;
          s[j] = -std::numeric_limits<double>::infinity();
          if (!visible) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += at(q, b, h, i, d) * at(k, b, g, j, d);
          dot *= scale;
          if (softcap > 0.0f) dot = softcap * std::tanh(dot / softcap);
          if (bias.defined()) dot += at(bias, b, h, i, j);
          s[j] = dot;
          mx = std::max(mx, dot);
        }
        if (std::isinf(mx)) continue;
        double sum = 0.0;
        for (int64_t j = 0; j < Lk; ++j) sum += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        double* o = out.data() + ((b * Hq + h) * Lq + i) * Dv;
        for (int64_t j = 0; j < Lk; ++j) {
          if (std::isinf(s[j])) continue;
          const double p = std::exp(s[j] - mx) / sum;
          for (int64_t c = 0; c < Dv; ++c) o[c] += p * at(v, b, g, j, c);
        }
      }
    }
  }
  return out;
}

void expect_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const ops::AttentionMask& mask,
                 float softcap = 0.0f, double tol = 5e-5) {
  Tensor out = ops::sdpa(q, k, v, scale, mask, softcap);
  ASSERT_EQ(out.shape(), (Shape{q.size(0), q.size(1), q.size(2), v.size(3)}));
  ASSERT_EQ(out.dtype(), q.dtype());
  const std::vector<double> want = reference(q, k, v, scale, mask, softcap);
  const std::vector<float> got = out.to_f32_vector();
  int failures = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol) && ++failures <= 5) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
}

struct Dims {
  int64_t b, hq, hkv, lq, lk, d, dv;
};

TEST(SdpaTest, GqaRatiosAndHeadDims) {
  uint32_t seed = 1;
  for (Dims s : {Dims{2, 4, 4, 5, 9, 16, 16}, Dims{1, 4, 2, 7, 13, 64, 64}, Dims{2, 6, 2, 3, 17, 17, 17},
                 Dims{1, 3, 1, 4, 6, 8, 5}, Dims{1, 2, 1, 1, 129, 128, 128}}) {
    Tensor q = random_tensor({s.b, s.hq, s.lq, s.d}, Dtype::f32, seed++);
    Tensor k = random_tensor({s.b, s.hkv, s.lk, s.d}, Dtype::f32, seed++);
    Tensor v = random_tensor({s.b, s.hkv, s.lk, s.dv}, Dtype::f32, seed++);
    ops::AttentionMask nc;
    nc.causal = false;
    expect_sdpa(q, k, v, 1.0f / std::sqrt(static_cast<float>(s.d)), nc);
    ops::AttentionMask causal;
    causal.q_offset = s.lk - s.lq;
    expect_sdpa(q, k, v, 0.3f, causal);
  }
}

TEST(SdpaTest, CausalOffsetsAndWindows) {
  Tensor q = random_tensor({2, 6, 37, 32}, Dtype::f32, 11);
  Tensor k = random_tensor({2, 2, 300, 32}, Dtype::f32, 12);
  Tensor v = random_tensor({2, 2, 300, 32}, Dtype::f32, 13);
  for (int64_t offset : {0, 5, 263}) {
    for (int64_t window : {0, 1, 7, 64}) {
      ops::AttentionMask m;
      m.q_offset = offset;
      m.window = window;
      SCOPED_TRACE(::testing::Message() << "offset " << offset << " window " << window);
      expect_sdpa(q, k, v, 0.2f, m);
    }
  }
}

TEST(SdpaTest, KvLenBiasAndSoftcap) {
  Tensor q = random_tensor({3, 4, 6, 24}, Dtype::f32, 21);
  Tensor k = random_tensor({3, 2, 40, 24}, Dtype::f32, 22);
  Tensor v = random_tensor({3, 2, 40, 20}, Dtype::f32, 23);
  ops::AttentionMask m;
  m.causal = false;
  m.kv_len = Tensor::from_vector<int32_t>({40, 17, 1}, {3});
  expect_sdpa(q, k, v, 0.5f, m);
  m.causal = true;
  m.q_offset = 30;
  expect_sdpa(q, k, v, 0.5f, m);

  Tensor bias = random_tensor({6, 40}, Dtype::f32, 24, 2.0f);
  for (int64_t j = 0; j < 40; j += 3) bias.data<float>()[2 * 40 + j] = -std::numeric_limits<float>::infinity();
  ops::AttentionMask mb;
  mb.causal = false;
  mb.bias = bias;
  expect_sdpa(q, k, v, 0.5f, mb);
  mb.bias = random_tensor({3, 1, 1, 40}, Dtype::f32, 25);
  expect_sdpa(q, k, v, 0.5f, mb);
  mb.bias = random_tensor({1, 4, 6, 40}, Dtype::f32, 26);
  mb.kv_len = Tensor::from_vector<int32_t>({20, 40, 33}, {3});
  expect_sdpa(q, k, v, 0.5f, mb, 1.5f);
  ops::AttentionMask mc;
  mc.q_offset = 34;
  mc.window = 9;
  expect_sdpa(random_tensor({3, 4, 6, 24}, Dtype::f32, 27, 4.0f), k, v, 1.0f, mc, 2.0f);
}

// Heads wider than a backend's limit (CUDA: 256) run as calls of narrower heads: q/k dims past the limit
// as an additive score bias, values in slices; the result is sdpa's, masks and a caller's bias included.
TEST(SdpaTest, SplitHeadsEqualsWholeHeads) {
  struct Case {
    int64_t b, hq, hkv, lq, lk, d, dv, max_dim;
  };
  uint32_t seed = 400;
  for (Case c : {Case{1, 4, 2, 5, 9, 40, 40, 16}, Case{2, 6, 2, 1, 30, 24, 48, 16}, Case{1, 2, 1, 7, 7, 33, 8, 32},
                 Case{2, 4, 4, 3, 12, 8, 20, 8}, Case{1, 8, 2, 4, 20, 512, 512, 256}}) {
    Tensor q = random_tensor({c.b, c.hq, c.lq, c.d}, Dtype::f32, seed++);
    Tensor k = random_tensor({c.b, c.hkv, c.lk, c.d}, Dtype::f32, seed++);
    Tensor v = random_tensor({c.b, c.hkv, c.lk, c.dv}, Dtype::f32, seed++);
    ops::AttentionMask causal, windowed, padded;
    causal.q_offset = c.lk - c.lq;
    windowed.q_offset = c.lk - c.lq;
    windowed.window = 4;
    padded.causal = false;
    std::vector<int32_t> lens(static_cast<size_t>(c.b));
    for (int64_t i = 0; i < c.b; ++i) lens[static_cast<size_t>(i)] = static_cast<int32_t>(c.lk - 5 * i);
    padded.kv_len = Tensor::from_vector(lens, {c.b});
    padded.bias = random_tensor({1, c.hq, c.lq, c.lk}, Dtype::f32, seed++);
    for (const ops::AttentionMask* m : {&causal, &windowed, &padded}) {
      SCOPED_TRACE(::testing::Message() << "d " << c.d << " dv " << c.dv << " limit " << c.max_dim << " window "
                                        << m->window << " bias " << m->bias.defined());
      Tensor out = ops::sdpa_split_heads(q, k, v, 0.3f, *m, 0.0f, c.max_dim);
      ASSERT_EQ(out.shape(), (Shape{c.b, c.hq, c.lq, c.dv}));
      const std::vector<double> want = reference(q, k, v, 0.3f, *m, 0.0f);
      const std::vector<float> got = out.to_f32_vector();
      int failures = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        if (!(std::fabs(got[i] - want[i]) <= 5e-5) && ++failures <= 5) {
          ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
        }
      }
    }
  }
  // A softcap needs the whole score: refused when q/k are split, fine when only values are.
  Tensor q = random_tensor({1, 2, 3, 20}, Dtype::f32, 1), k = random_tensor({1, 2, 5, 20}, Dtype::f32, 2);
  ops::AttentionMask m;
  EXPECT_THROW(ops::sdpa_split_heads(q, k, k, 1.0f, m, 5.0f, 16), Error);
  Tensor v = random_tensor({1, 2, 5, 40}, Dtype::f32, 3);
  const std::vector<float> whole = ops::sdpa(q, k, v, 1.0f, m, 5.0f).to_f32_vector();
  const std::vector<float> split = ops::sdpa_split_heads(q, k, v, 1.0f, m, 5.0f, 32).to_f32_vector();
  ASSERT_EQ(whole.size(), split.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(whole[i], split[i], 1e-6) << i;
}

TEST(SdpaTest, DecodeSplitsKeys) {
  for (int64_t lk : {1, 200, 1000, 2048}) {
    Tensor q = random_tensor({1, 6, 1, 64}, Dtype::f32, 31);
    Tensor k = random_tensor({1, 2, lk, 64}, Dtype::f32, 32);
    Tensor v = random_tensor({1, 2, lk, 64}, Dtype::f32, 33);
    ops::AttentionMask m;
    m.q_offset = lk - 1;
    SCOPED_TRACE(::testing::Message() << "lk " << lk);
    expect_sdpa(q, k, v, 0.125f, m);
    m.window = 150;
    expect_sdpa(q, k, v, 0.125f, m);
  }
  Tensor q = random_tensor({2, 8, 1, 128}, Dtype::f32, 34);
  Tensor k = random_tensor({2, 8, 700, 128}, Dtype::f32, 35);
  ops::AttentionMask m;
  m.q_offset = 699;
  m.kv_len = Tensor::from_vector<int32_t>({700, 333}, {2});
  expect_sdpa(q, k, random_tensor({2, 8, 700, 256}, Dtype::f32, 36), 0.09f, m);
}

TEST(SdpaTest, FullyMaskedRowsGiveZeros) {
  Tensor q = random_tensor({2, 2, 4, 16}, Dtype::f32, 41);
  Tensor k = random_tensor({2, 1, 10, 16}, Dtype::f32, 42);
  Tensor v = random_tensor({2, 1, 10, 16}, Dtype::f32, 43);
  ops::AttentionMask m;
  m.kv_len = Tensor::from_vector<int32_t>({0, 10}, {2});
  m.causal = false;
  expect_sdpa(q, k, v, 1.0f, m);
  ops::AttentionMask neg;
  neg.q_offset = -2;  // the first two queries precede every key
  expect_sdpa(q, k, v, 1.0f, neg);
  Tensor bias = Tensor::full({4, 10}, 0.0, Dtype::f32);
  for (int64_t j = 0; j < 10; ++j) bias.data<float>()[10 + j] = -std::numeric_limits<float>::infinity();
  ops::AttentionMask mb;
  mb.causal = false;
  mb.bias = bias;
  Tensor out = ops::sdpa(q, k, v, 1.0f, mb);
  for (float x : out.narrow(2, 1, 1).contiguous().to_f32_vector()) EXPECT_EQ(x, 0.0f);
  expect_sdpa(q, k, v, 1.0f, mb);
}

TEST(SdpaTest, StridedCacheViews) {
  Tensor kbuf = random_tensor({2, 3, 64, 32}, Dtype::f32, 51);
  Tensor vbuf = random_tensor({2, 3, 64, 40}, Dtype::f32, 52);
  Tensor k = kbuf.narrow(2, 0, 23), v = vbuf.narrow(2, 0, 23).narrow(3, 4, 32);
  Tensor q = random_tensor({2, 5, 6, 32}, Dtype::f32, 53).transpose(1, 2);  // [2, 6, 5, 32] from [B, L, H, D]
  ops::AttentionMask m;
  m.q_offset = 18;
  expect_sdpa(q, k, v, 0.2f, m);
  Tensor kt = random_tensor({2, 3, 32, 23}, Dtype::f32, 54).transpose(2, 3);  // inner stride != 1
  expect_sdpa(q, kt, v, 0.2f, m);
  Tensor qd = random_tensor({2, 6, 1, 32}, Dtype::f32, 55);
  m.q_offset = 22;
  expect_sdpa(qd, k, v, 0.2f, m);
}

TEST(SdpaTest, HalfPrecisionInputs) {
  for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
    Tensor kbuf = random_tensor({1, 2, 300, 64}, dt, 61);
    Tensor q = random_tensor({1, 6, 45, 64}, dt, 62);
    Tensor k = kbuf.narrow(2, 0, 290);
    Tensor v = random_tensor({1, 2, 290, 64}, dt, 63);
    ops::AttentionMask m;
    m.q_offset = 245;
    expect_sdpa(q, k, v, 0.125f, m, 0.0f, dt == Dtype::bf16 ? 8e-3 : 1e-3);
    expect_sdpa(q.narrow(2, 44, 1), k, v, 0.125f, m, 30.0f, dt == Dtype::bf16 ? 8e-3 : 1e-3);
  }
}

TEST(SdpaTest, PrefillBlocks) {
  Tensor q = random_tensor({1, 6, 260, 64}, Dtype::f32, 71);
  Tensor k = random_tensor({1, 2, 260, 64}, Dtype::f32, 72);
  Tensor v = random_tensor({1, 2, 260, 64}, Dtype::f32, 73);
  expect_sdpa(q, k, v, 0.125f, ops::AttentionMask{});
}

TEST(SdpaTest, Errors) {
  Tensor q = random_tensor({1, 4, 2, 8}, Dtype::f32, 81);
  Tensor k = random_tensor({1, 2, 5, 8}, Dtype::f32, 82);
  Tensor v = random_tensor({1, 2, 5, 8}, Dtype::f32, 83);
  ops::AttentionMask m;
  EXPECT_NO_THROW(ops::sdpa(q, k, v, 1.0f, m));
  EXPECT_THROW(ops::sdpa(q.select(0, 0), k, v, 1.0f, m), Error);
  EXPECT_THROW(ops::sdpa(q, random_tensor({1, 3, 5, 8}, Dtype::f32, 1), random_tensor({1, 3, 5, 8}, Dtype::f32, 2),
                         1.0f, m),
               Error);
  EXPECT_THROW(ops::sdpa(q, random_tensor({1, 2, 5, 7}, Dtype::f32, 3), v, 1.0f, m), Error);
  EXPECT_THROW(ops::sdpa(q, k, random_tensor({1, 2, 4, 8}, Dtype::f32, 4), 1.0f, m), Error);
  EXPECT_THROW(ops::sdpa(q, random_tensor({1, 2, 5, 8}, Dtype::bf16, 5), v, 1.0f, m), Error);
  EXPECT_THROW(ops::sdpa(q, random_tensor({2, 2, 5, 8}, Dtype::f32, 6), v, 1.0f, m), Error);
  ops::AttentionMask bad_len;
  bad_len.kv_len = Tensor::from_vector<int32_t>({5, 5}, {2});
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, bad_len), Error);
  bad_len.kv_len = Tensor::from_vector<int64_t>({5}, {1});
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, bad_len), Error);
  bad_len.kv_len = Tensor::from_vector<int32_t>({-1}, {1});
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, bad_len), Error);
  // A length past Lk hides nothing.
  ops::AttentionMask all, past;
  past.kv_len = Tensor::from_vector<int32_t>({9}, {1});
  EXPECT_EQ(ops::sdpa(q, k, v, 1.0f, past).to_f32_vector(), ops::sdpa(q, k, v, 1.0f, all).to_f32_vector());
  ops::AttentionMask bad_bias;
  bad_bias.bias = random_tensor({3, 5}, Dtype::f32, 7);
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, bad_bias), Error);
  bad_bias.bias = random_tensor({2, 5}, Dtype::bf16, 8);
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, bad_bias), Error);
  EXPECT_THROW(ops::sdpa(q, k, v, 1.0f, m, -1.0f), Error);
}

}  // namespace
}  // namespace tern
