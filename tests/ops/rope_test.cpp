// RoPE: rope_table against values computed from transformers' ROPE_INIT_FUNCTIONS formulas, and
// rope() against a reference rotation (partial rotary, per-row positions, strided x, bf16).
#include "tern/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/ops/ops_test_util.h"

namespace tern {
namespace {

// Reference values: computed in Python (3.11, no numpy/torch) by transcribing transformers'
// _compute_{default,linear_scaling,llama3,yarn}_parameters and running every torch f32 tensor op as
// one IEEE float32 rounding (struct.pack('f', ...) after each +, -, *, /, pow in double;
// `s / t` as t.reciprocal() * s, scalars cast to f32), printed with %.9g (round-trips f32), so the
// tables must match bit for bit.
struct Ref {
  int64_t i;
  float v;
};

void expect_table(const ops::RopeTable& t, int64_t n, const std::vector<Ref>& refs) {
  ASSERT_EQ(static_cast<int64_t>(t.inv_freq.size()), n);
  for (const Ref& r : refs) EXPECT_EQ(t.inv_freq[r.i], r.v) << "inv_freq[" << r.i << "]";
}

TEST(RopeTable, Default) {
  ops::RopeConfig c;
  c.theta = 10000.0;
  c.head_dim = 64;
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_EQ(t.rotary_dim, 64);
  EXPECT_EQ(t.attention_scale, 1.0f);
  expect_table(t, 32, {{0, 1.0f}, {1, 0.749894202f}, {10, 0.0562341288f}, {31, 0.00013335215f}});
}

TEST(RopeTable, PartialRotaryUsesRotaryDim) {
  ops::RopeConfig c;
  c.theta = 1e6;
  c.head_dim = 128;
  c.rotary_dim = 32;  // partial_rotary_factor 0.25
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_EQ(t.rotary_dim, 32);
  expect_table(t, 16, {{0, 1.0f}, {1, 0.421696514f}, {15, 2.37137374e-06f}});
}

TEST(RopeTable, Linear) {
  ops::RopeConfig c;
  c.type = "linear";
  c.head_dim = 64;
  c.factor = 4.0;
  expect_table(ops::rope_table(c), 32, {{0, 0.25f}, {5, 0.0592843406f}, {31, 3.33380376e-05f}});
}

TEST(RopeTable, Llama3) {
  ops::RopeConfig c;
  c.type = "llama3";
  c.theta = 500000.0;
  c.head_dim = 128;
  c.factor = 8.0;
  c.low_freq_factor = 1.0;
  c.high_freq_factor = 4.0;
  c.original_max_position = 8192;
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_EQ(t.attention_scale, 1.0f);
  // 0..28 high frequency (kept), 29..34 smoothed, 35.. low frequency (divided by factor).
  expect_table(t, 64,
               {{0, 1.0f}, {20, 0.0165604409f}, {29, 0.00216657063f}, {30, 0.00137189368f}, {32, 0.000524846022f},
                {34, 0.000178507791f}, {40, 3.42810235e-05f}, {45, 1.22976389e-05f}, {50, 4.41153452e-06f},
                {63, 3.06892588e-07f}});
}

TEST(RopeTable, YarnDefaultAttentionFactor) {
  ops::RopeConfig c;
  c.type = "yarn";
  c.theta = 1e6;
  c.head_dim = 128;
  c.factor = 4.0;
  c.original_max_position = 32768;
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_FLOAT_EQ(t.attention_scale, 1.13862943649292f);  // 0.1 * ln(4) + 1
  // Correction range [23, 40].
  expect_table(t, 64,
               {{0, 1.0f}, {10, 0.115478203f}, {20, 0.0133352149f}, {24, 0.00537532149f}, {30, 0.00106436096f},
                {35, 0.000246258394f}, {40, 4.44569851e-05f}, {63, 3.10234441e-07f}});
}

TEST(RopeTable, YarnMscaleRatio) {
  ops::RopeConfig c;
  c.type = "yarn";
  c.theta = 10000.0;
  c.head_dim = 64;
  c.factor = 40.0;
  c.original_max_position = 4096;
  c.mscale = 1.0;
  c.mscale_all_dim = 0.707;
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_FLOAT_EQ(t.attention_scale, 1.0857263803482056f);
  expect_table(t, 32,
               {{0, 1.0f}, {5, 0.237137362f}, {10, 0.0562341288f}, {12, 0.0268793609f}, {15, 0.0083345091f},
                {18, 0.00224936521f}, {20, 0.000790569407f}, {31, 3.33380353e-06f}});
  c.attention_factor = 0.5;  // an explicit attention factor wins
  EXPECT_EQ(ops::rope_table(c).attention_scale, 0.5f);
}

TEST(RopeTable, YarnWithoutTruncation) {
  ops::RopeConfig c;
  c.type = "yarn";
  c.theta = 10000.0;
  c.head_dim = 64;
  c.factor = 8.0;
  c.original_max_position = 2048;
  c.truncate = false;  // correction range [8.064, 20.105]
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_FLOAT_EQ(t.attention_scale, 1.2079441547393799f);
  expect_table(t, 32,
               {{0, 1.0f}, {5, 0.237137362f}, {8, 0.100000001f}, {12, 0.0225780979f}, {20, 0.000419459218f},
                {31, 1.66690188e-05f}});
}

TEST(RopeTable, BadConfig) {
  ops::RopeConfig c;
  EXPECT_THROW(ops::rope_table(c), Error);  // head_dim 0
  c.head_dim = 64;
  c.rotary_dim = 33;
  EXPECT_THROW(ops::rope_table(c), Error);
  c.rotary_dim = 128;
  EXPECT_THROW(ops::rope_table(c), Error);
  c.rotary_dim = 0;
  c.type = "longrope";
  EXPECT_THROW(ops::rope_table(c), Error);
  c.type = "llama3";
  c.factor = 8.0;
  EXPECT_THROW(ops::rope_table(c), Error);  // no original_max_position
  c.type = "yarn";
  EXPECT_THROW(ops::rope_table(c), Error);
  c.type = "linear";
  c.factor = 0.0;
  EXPECT_THROW(ops::rope_table(c), Error);
}

using ops_test::random_uniform;

// HF's rotation in double from the table: cos/sin of (f32 position * inv_freq), times the scale.
// pos(b, l) gives the position of row b, token l.
template <typename PosFn>
std::vector<float> ref_rope(const Tensor& x, const ops::RopeTable& t, PosFn pos) {
  std::vector<float> xv = x.to_f32_vector(), out(xv.size());
  const int64_t nb = x.size(0), nh = x.size(1), nl = x.size(2), d = x.size(3), half = t.rotary_dim / 2;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t l = 0; l < nl; ++l) {
        const size_t base = static_cast<size_t>(((b * nh + h) * nl + l) * d);
        for (int64_t j = 0; j < d; ++j) out[base + j] = xv[base + j];
        for (int64_t j = 0; j < half; ++j) {
          const double f = static_cast<float>(pos(b, l)) * t.inv_freq[j];
          const double c = std::cos(f) * t.attention_scale, s = std::sin(f) * t.attention_scale;
          const double x1 = xv[base + j], x2 = xv[base + j + half];
          out[base + j] = static_cast<float>(x1 * c - x2 * s);
          out[base + j + half] = static_cast<float>(x2 * c + x1 * s);
        }
      }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
}

ops::RopeTable table(int64_t head_dim, int64_t rotary_dim) {
  ops::RopeConfig c;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  return ops::rope_table(c);
}

TEST(Rope, SharedPositionsFullAndPartial) {
  std::vector<int64_t> p = {0, 1, 5, 17, 4096};
  Tensor pos = Tensor::from_vector(p, {5});
  for (int64_t rot : {8, 4, 2}) {
    ops::RopeTable t = table(8, rot);
    Tensor x = random_uniform({2, 3, 5, 8}, Dtype::f32, 1);
    Tensor y = ops::rope(x, pos, t);
    EXPECT_EQ(y.shape(), x.shape());
    expect_close(y.to_f32_vector(), ref_rope(x, t, [&](int64_t, int64_t l) { return p[l]; }), 2e-6f);
  }
}

TEST(Rope, PerRowPositionsI32AndScale) {
  std::vector<int32_t> p = {3, 4, 5, 100, 200, 300, 0, 0, 1};
  Tensor pos = Tensor::from_vector(p, {3, 3});
  ops::RopeTable t = table(33 * 2, 0);
  t.attention_scale = 1.25f;
  Tensor x = random_uniform({3, 2, 3, 66}, Dtype::f32, 2);
  expect_close(ops::rope(x, pos, t).to_f32_vector(),
               ref_rope(x, t, [&](int64_t b, int64_t l) { return p[b * 3 + l]; }), 2e-6f);
}

TEST(Rope, StridedInputsAndLargePositions) {
  // x from a [B, L, H, D] projection viewed as [B, H, L, D]; positions a strided slice.
  Tensor x = random_uniform({2, 7, 4, 16}, Dtype::f32, 3).transpose(1, 2);
  std::vector<int64_t> all = {100000, 0, 100001, 0, 65535, 0, 7, 0, 8, 0, 9, 0, 131071, 0};
  Tensor pos = Tensor::from_vector(all, {14}).slice(0, 0, 14, 2);
  ops::RopeTable t = table(16, 12);
  expect_close(ops::rope(x, pos, t).to_f32_vector(),
               ref_rope(x, t, [&](int64_t, int64_t l) { return all[l * 2]; }), 2e-6f);
  // Every head/token in parallel, one position row per batch.
  Tensor big = random_uniform({2, 16, 129, 64}, Dtype::f32, 4);
  std::vector<int64_t> pp(2 * 129);
  for (size_t i = 0; i < pp.size(); ++i) pp[i] = static_cast<int64_t>(i * 37 % 5000);
  ops::RopeTable tb = table(64, 64);
  expect_close(ops::rope(big, Tensor::from_vector(pp, {2, 129}), tb).to_f32_vector(),
               ref_rope(big, tb, [&](int64_t b, int64_t l) { return pp[b * 129 + l]; }), 2e-6f);
}

TEST(Rope, HalfDtypes) {
  std::vector<int64_t> p = {0, 9, 33};
  Tensor pos = Tensor::from_vector(p, {3});
  ops::RopeTable t = table(32, 16);
  for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
    Tensor x = random_uniform({1, 2, 3, 32}, dt, 5);
    Tensor y = ops::rope(x, pos, t);
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y.to_f32_vector(), ref_rope(x, t, [&](int64_t, int64_t l) { return p[l]; }),
                 dt == Dtype::bf16 ? 8e-3f : 1e-3f);
  }
}

TEST(Rope, BadInput) {
  ops::RopeTable t = table(8, 8);
  Tensor x = random_uniform({1, 2, 3, 8}, Dtype::f32, 6);
  Tensor pos = Tensor::from_vector(std::vector<int64_t>{0, 1, 2}, {3});
  try {
    ops::rope(x, Tensor::from_vector(std::vector<int64_t>{0, 1}, {2}), t);
    FAIL() << "expected a positions shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[rope] expected positions of shape [3] or [1, 3], got [2]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::rope(x, Tensor::from_vector(std::vector<float>{0, 1, 2}, {3}), t), Error);
  EXPECT_THROW(ops::rope(random_uniform({2, 3, 8}, Dtype::f32, 7), pos, t), Error);
  EXPECT_THROW(ops::rope(Tensor::zeros({1, 2, 3, 8}, Dtype::i32), pos, t), Error);
  EXPECT_THROW(ops::rope(random_uniform({1, 2, 3, 4}, Dtype::f32, 8), pos, t), Error);  // rotary_dim > D
  ops::RopeTable bad = t;
  bad.inv_freq.pop_back();
  EXPECT_THROW(ops::rope(x, pos, bad), Error);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Gemma 4's proportional RoPE: exponents over the whole head, zero frequencies past the rotary part,
// and a rotation that pairs i with i + head_dim / 2 across the whole head.
TEST(RopeTable, ProportionalSpansTheHeadWithZeroTail) {
  ops::RopeConfig c;
  c.type = "proportional";
  c.theta = 1e6;
  c.head_dim = 16;
  c.rotary_dim = 4;
  ops::RopeTable t = ops::rope_table(c);
  EXPECT_EQ(t.rotary_dim, 16);
  ASSERT_EQ(t.inv_freq.size(), 8u);
  EXPECT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_NEAR(t.inv_freq[1], std::pow(1e6, -2.0 / 16.0), 1e-7);
  for (size_t i = 2; i < 8; ++i) EXPECT_EQ(t.inv_freq[i], 0.0f) << i;

  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = 0.1f * static_cast<float>(i + 1);
  Tensor x = Tensor::from_vector(xs, {1, 1, 1, 16});
  const int32_t pos = 7;
  Tensor y = ops::rope(x, Tensor::from_vector(std::vector<int32_t>{pos}, {1}), t).contiguous();
  for (int j = 0; j < 8; ++j) {
    const double f = j < 2 ? pos * std::pow(1e6, -2.0 * j / 16.0) : 0.0;
    const double a = xs[j], b = xs[j + 8];
    EXPECT_NEAR(y.data<float>()[j], a * std::cos(f) - b * std::sin(f), 1e-5) << j;
    EXPECT_NEAR(y.data<float>()[j + 8], b * std::cos(f) + a * std::sin(f), 1e-5) << j + 8;
  }
}

}  // namespace
}  // namespace tern
