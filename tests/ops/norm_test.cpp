// RMSNorm against a double-precision reference: odd widths, no weight, strided x and weight,
// mixed bf16/f16/f32 dtypes, the parallel path, and bad input.
#include "tern/ops/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/ops/ops_test_util.h"

namespace tern {
namespace {

using ops_test::random_uniform;

// y = x / sqrt(mean(x^2) + eps) * w over the last dim, in double.
std::vector<float> ref_rms_norm(const Tensor& x, const Tensor& w, float eps) {
  std::vector<float> xv = x.to_f32_vector();
  std::vector<float> wv = w.defined() ? w.to_f32_vector() : std::vector<float>();
  const int64_t d = x.size(-1);
  std::vector<float> out(xv.size());
  for (size_t r = 0; r < xv.size() / d; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xv[r * d + i]) * xv[r * d + i];
    double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) out[r * d + i] = static_cast<float>(xv[r * d + i] * inv * (w.defined() ? wv[i] : 1.0f));
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol, float atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
}

TEST(RmsNorm, OddWidthsF32) {
  for (int64_t d : {1, 7, 33, 129}) {
    for (int64_t rows : {1, 5}) {
      Tensor x = random_uniform({rows, d}, Dtype::f32, static_cast<uint32_t>(d));
      Tensor w = random_uniform({d}, Dtype::f32, 100 + static_cast<uint32_t>(d), 0.5f, 1.5f);
      Tensor y = ops::rms_norm(x, w, 1e-6f);
      EXPECT_EQ(y.shape(), x.shape());
      EXPECT_EQ(y.dtype(), Dtype::f32);
      expect_close(y.to_f32_vector(), ref_rms_norm(x, w, 1e-6f), 2e-6f, 1e-7f);
    }
  }
}

TEST(RmsNorm, ScaleFreeAndEps) {
  Tensor x = random_uniform({3, 4, 33}, Dtype::f32, 1, -0.01f, 0.01f);
  expect_close(ops::rms_norm(x, Tensor(), 1e-2f).to_f32_vector(), ref_rms_norm(x, Tensor(), 1e-2f), 2e-6f, 1e-7f);
  Tensor z = Tensor::zeros({2, 8}, Dtype::f32);
  for (float v : ops::rms_norm(z, Tensor(), 1e-6f).to_f32_vector()) EXPECT_EQ(v, 0.0f);
}

TEST(RmsNorm, StridedInputAndWeight) {
  // x as the transpose of a [D, N] tensor: the normalised dim has stride N.
  Tensor x = random_uniform({33, 6}, Dtype::f32, 2).transpose(0, 1);
  Tensor w = random_uniform({66}, Dtype::f32, 3, 0.5f, 1.5f).slice(0, 0, 66, 2);
  expect_close(ops::rms_norm(x, w, 1e-5f).to_f32_vector(), ref_rms_norm(x, w, 1e-5f), 2e-6f, 1e-7f);
  // Per-head norm on a [T, H, D] slice of a fused projection (Qwen3's q_norm): rows strided.
  Tensor fused = random_uniform({4, 3 * 16 + 8}, Dtype::f32, 4);
  Tensor q = fused.slice(1, 0, 48).view({4, 3, 16});
  Tensor qw = random_uniform({16}, Dtype::f32, 5);
  expect_close(ops::rms_norm(q, qw, 1e-6f).to_f32_vector(), ref_rms_norm(q, qw, 1e-6f), 2e-6f, 1e-7f);
  // Broadcast rows (stride 0) are legal input.
  Tensor row = random_uniform({1, 7}, Dtype::f32, 6).broadcast_to({3, 7});
  expect_close(ops::rms_norm(row, Tensor(), 1e-6f).to_f32_vector(), ref_rms_norm(row, Tensor(), 1e-6f), 2e-6f, 1e-7f);
}

TEST(RmsNorm, MixedDtypes) {
  for (Dtype xd : {Dtype::bf16, Dtype::f16, Dtype::f32}) {
    for (Dtype wd : {Dtype::bf16, Dtype::f16, Dtype::f32}) {
      Tensor x = random_uniform({3, 33}, xd, 7);
      Tensor w = random_uniform({33}, wd, 8, 0.5f, 1.5f);
      Tensor y = ops::rms_norm(x, w, 1e-6f);
      EXPECT_EQ(y.dtype(), xd);
      float tol = xd == Dtype::bf16 ? 8e-3f : (xd == Dtype::f16 ? 1e-3f : 2e-6f);
      expect_close(y.to_f32_vector(), ref_rms_norm(x, w, 1e-6f), tol, 1e-6f);
    }
  }
}

TEST(RmsNorm, ManyRowsInParallel) {
  Tensor x = random_uniform({1000, 129}, Dtype::f32, 9);
  Tensor w = random_uniform({129}, Dtype::bf16, 10);
  expect_close(ops::rms_norm(x, w, 1e-6f).to_f32_vector(), ref_rms_norm(x, w, 1e-6f), 3e-6f, 1e-7f);
}

TEST(RmsNorm, BadInput) {
  Tensor x = random_uniform({2, 8}, Dtype::f32, 11);
  try {
    ops::rms_norm(x, random_uniform({7}, Dtype::f32, 12), 1e-6f);
    FAIL() << "expected a weight shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[rms_norm] expected weight of shape [8], got [7]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::rms_norm(Tensor::zeros({2, 8}, Dtype::i32), Tensor(), 1e-6f), Error);
  EXPECT_THROW(ops::rms_norm(x, Tensor::zeros({8}, Dtype::i32), 1e-6f), Error);
  EXPECT_THROW(ops::rms_norm(Tensor::from_vector(std::vector<float>{1.0f}, {}), Tensor(), 1e-6f), Error);
  EXPECT_THROW(ops::rms_norm(x, Tensor(), -1.0f), Error);
  EXPECT_THROW(ops::rms_norm(Tensor(), Tensor(), 1e-6f), Error);
}

}  // namespace
}  // namespace tern
