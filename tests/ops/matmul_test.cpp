// matmul and linear against naive double-accumulation loops: odd sizes, transposes, broadcast batch dims,
// strided views, bf16/f16 operands and weights, bias, and the errors bad input gets.
#include "tern/ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tern {
namespace {

Tensor random_tensor(const Shape& shape, Dtype dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(numel(shape));
  for (float& x : v) x = dist(rng);
  Tensor f = Tensor::from_vector(v, shape);
  if (dtype == Dtype::f32) return f;
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (dtype == Dtype::bf16) t.data<bf16>()[i] = bf16(v[i]);
    if (dtype == Dtype::f16) t.data<f16>()[i] = f16(v[i]);
  }
  return t;
}

// Element at a multi-index of a (possibly strided) float tensor, widened to double.
double at(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride(d);
  switch (t.dtype()) {
    case Dtype::f32: return t.data<float>()[off];
    case Dtype::bf16: return static_cast<float>(t.data<bf16>()[off]);
    case Dtype::f16: return static_cast<float>(t.data<f16>()[off]);
    default: ADD_FAILURE() << "unexpected dtype"; return 0.0;
  }
}

std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

// Checks out == op(a) @ op(b) with batch broadcasting; tolerance scales with sum |a||b| per element.
void expect_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor& out, double rel) {
  const int64_t m = out.size(-2), n = out.size(-1), k = ta ? a.size(-2) : a.size(-1);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  Shape fa = batch, fb = batch;
  fa.insert(fa.end(), a.shape().end() - 2, a.shape().end());
  fb.insert(fb.end(), b.shape().end() - 2, b.shape().end());
  const Tensor ab = a.broadcast_to(fa), bb = b.broadcast_to(fb);
  int failures = 0;
  for (int64_t bi = 0; bi < std::max<int64_t>(numel(batch), 1) && failures < 5; ++bi) {
    std::vector<int64_t> ia = unravel(bi, batch), ib = ia, io = ia;
    ia.resize(ia.size() + 2), ib.resize(ib.size() + 2), io.resize(io.size() + 2);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          ia[ia.size() - 2] = ta ? p : i, ia.back() = ta ? i : p;
          ib[ib.size() - 2] = tb ? j : p, ib.back() = tb ? p : j;
          const double x = at(ab, ia) * at(bb, ib);
          sum += x, mag += std::fabs(x);
        }
        io[io.size() - 2] = i, io.back() = j;
        const double got = at(out, io);
        const double tol = rel * (mag + std::fabs(sum)) + 1e-6;
        if (std::fabs(got - sum) > tol && ++failures <= 5) {
          ADD_FAILURE() << "batch " << bi << " (" << i << ", " << j << "): got " << got << ", want " << sum;
        }
      }
    }
  }
}

TEST(MatmulTest, OddSizesAndTransposes) {
  const int64_t sizes[] = {1, 3, 17, 64, 129};
  uint32_t seed = 1;
  for (int64_t m : sizes) {
    for (int64_t n : sizes) {
      for (int64_t k : sizes) {
        for (int t = 0; t < 4; ++t) {
          const bool ta = t & 1, tb = t & 2;
          Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, Dtype::f32, seed++);
          Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, Dtype::f32, seed++);
          Tensor c = ops::matmul(a, b, ta, tb);
          ASSERT_EQ(c.shape(), (Shape{m, n}));
          SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " t " << t);
          expect_matmul(a, b, ta, tb, c, 1e-5);
        }
      }
    }
  }
}

TEST(MatmulTest, BroadcastBatchDims) {
  Tensor a = random_tensor({2, 1, 5, 7}, Dtype::f32, 11);
  Tensor b = random_tensor({3, 7, 4}, Dtype::f32, 12);
  Tensor c = ops::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 5, 4}));
  expect_matmul(a, b, false, false, c, 1e-5);

  Tensor w = random_tensor({7, 9}, Dtype::f32, 13);
  Tensor c2 = ops::matmul(a, w);
  ASSERT_EQ(c2.shape(), (Shape{2, 1, 5, 9}));
  expect_matmul(a, w, false, false, c2, 1e-5);

  Tensor bt = random_tensor({3, 4, 7}, Dtype::f32, 14);
  Tensor c3 = ops::matmul(a, bt, false, true);
  ASSERT_EQ(c3.shape(), (Shape{2, 3, 5, 4}));
  expect_matmul(a, bt, false, true, c3, 1e-5);
}

TEST(MatmulTest, StrideZeroBroadcastViews) {
  Tensor b0 = random_tensor({6, 5}, Dtype::f32, 21);
  Tensor b = b0.unsqueeze(0).broadcast_to({4, 6, 5});
  Tensor a = random_tensor({4, 3, 6}, Dtype::f32, 22);
  Tensor c = ops::matmul(a, b);
  expect_matmul(a, b, false, false, c, 1e-5);
  Tensor a0 = random_tensor({1, 3, 6}, Dtype::f32, 23);
  Tensor c2 = ops::matmul(a0.broadcast_to({4, 3, 6}), random_tensor({4, 6, 5}, Dtype::f32, 24));
  EXPECT_EQ(c2.shape(), (Shape{4, 3, 5}));
}

TEST(MatmulTest, StridedAndSlicedInputs) {
  Tensor big = random_tensor({3, 20, 30}, Dtype::f32, 31);
  Tensor a = big.slice(1, 2, 19).slice(2, 5, 22);  // [3, 17, 17], row stride 30
  Tensor b = random_tensor({3, 40, 17}, Dtype::f32, 32).slice(1, 1, 40, 3).transpose(-1, -2);  // col-major
  Tensor c = ops::matmul(a, b);
  expect_matmul(a, b, false, false, c, 1e-5);
  Tensor c_t = ops::matmul(a.transpose(-1, -2), b, true, false);
  expect_matmul(a.transpose(-1, -2), b, true, false, c_t, 1e-5);
  Tensor odd = big.slice(2, 0, 30, 2);  // inner stride 2: copied before BLAS
  Tensor w = random_tensor({15, 4}, Dtype::f32, 33);
  expect_matmul(odd, w, false, false, ops::matmul(odd, w), 1e-5);
  // Rows of one-row matrices strided across the batch dim fold into one GEMM only at their true stride.
  Tensor rows = random_tensor({5, 2, 17}, Dtype::f32, 34).slice(1, 0, 1);  // [5, 1, 17], batch stride 34
  Tensor w2 = random_tensor({17, 3}, Dtype::f32, 35);
  expect_matmul(rows, w2, false, false, ops::matmul(rows, w2), 1e-5);
  Tensor stacked = random_tensor({4, 9, 17}, Dtype::f32, 36);
  expect_matmul(stacked, w2, false, false, ops::matmul(stacked, w2), 1e-5);
}

TEST(MatmulTest, HalfPrecisionOperands) {
  for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
    Tensor a = random_tensor({2, 17, 64}, dt, 41);
    Tensor b = random_tensor({64, 33}, dt, 42);
    Tensor c = ops::matmul(a, b);
    ASSERT_EQ(c.dtype(), dt);
    expect_matmul(a, b, false, false, c, dt == Dtype::bf16 ? 4e-3 : 1e-3);
    Tensor bt = random_tensor({2, 33, 64}, dt, 43).slice(2, 0, 64);
    Tensor c2 = ops::matmul(a.transpose(-1, -2), bt, true, true);
    expect_matmul(a.transpose(-1, -2), bt, true, true, c2, dt == Dtype::bf16 ? 4e-3 : 1e-3);
  }
}

TEST(MatmulTest, EmptyDims) {
  Tensor c = ops::matmul(Tensor::empty({3, 0}, Dtype::f32), Tensor::empty({0, 4}, Dtype::f32));
  ASSERT_EQ(c.shape(), (Shape{3, 4}));
  for (float x : c.to_f32_vector()) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(ops::matmul(Tensor::empty({0, 5}, Dtype::f32), Tensor::empty({5, 4}, Dtype::f32)).numel(), 0);
}

TEST(MatmulTest, Errors) {
  Tensor a = random_tensor({3, 4}, Dtype::f32, 51);
  EXPECT_THROW(ops::matmul(random_tensor({4}, Dtype::f32, 1), a), Error);
  EXPECT_THROW(ops::matmul(a, random_tensor({5, 2}, Dtype::f32, 2)), Error);
  EXPECT_THROW(ops::matmul(a, random_tensor({4, 2}, Dtype::bf16, 3)), Error);
  EXPECT_THROW(ops::matmul(Tensor::zeros({3, 4}, Dtype::i32), Tensor::zeros({4, 2}, Dtype::i32)), Error);
  EXPECT_THROW(ops::matmul(random_tensor({2, 3, 4}, Dtype::f32, 4), random_tensor({3, 4, 2}, Dtype::f32, 5)), Error);
  EXPECT_THROW(ops::matmul(Tensor(), a), Error);
}

// Checks out [T, O] == x [T, I] @ w[O, I]^T + bias, in double.
void expect_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, double rel) {
  const int64_t in = w.size(1), o_n = w.size(0);
  const Tensor x2 = x.reshape({-1, in}), y2 = out.reshape({-1, o_n});
  int failures = 0;
  for (int64_t t = 0; t < x2.size(0); ++t) {
    for (int64_t o = 0; o < o_n; ++o) {
      double sum = bias.defined() ? at(bias, {o}) : 0.0, mag = std::fabs(sum);
      for (int64_t i = 0; i < in; ++i) {
        const double p = at(x2, {t, i}) * at(w, {o, i});
        sum += p, mag += std::fabs(p);
      }
      const double got = at(y2, {t, o});
      if (std::fabs(got - sum) > rel * (mag + std::fabs(sum)) + 1e-6 && ++failures <= 5) {
        ADD_FAILURE() << "(" << t << ", " << o << "): got " << got << ", want " << sum;
      }
    }
  }
}

TEST(LinearTest, OddSizesF32AndBf16Weights) {
  const int64_t sizes[] = {1, 3, 17, 64, 129};
  uint32_t seed = 100;
  for (Dtype wd : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (int64_t tokens : {1, 2, 3, 4, 5, 9, 17}) {
      for (int64_t in : sizes) {
        for (int64_t out : sizes) {
          Tensor x = random_tensor({tokens, in}, Dtype::f32, seed++);
          Tensor w = random_tensor({out, in}, wd, seed++);
          Tensor bias = (seed % 2) ? random_tensor({out}, Dtype::f32, seed++) : Tensor();
          Tensor y = ops::linear(x, w, bias);
          ASSERT_EQ(y.shape(), (Shape{tokens, out}));
          ASSERT_EQ(y.dtype(), Dtype::f32);
          SCOPED_TRACE(::testing::Message() << dtype_name(wd) << " T " << tokens << " in " << in << " out " << out);
          expect_linear(x, w, bias, y, 1e-5);
        }
      }
    }
  }
}

TEST(LinearTest, BlockedGemmPathForManyTokens) {
  for (Dtype wd : {Dtype::bf16, Dtype::f32}) {
    Tensor x = random_tensor({2, 9, 1024}, Dtype::f32, 201);
    Tensor w = random_tensor({600, 1024}, wd, 202);  // several widened blocks of rows
    Tensor bias = random_tensor({600}, Dtype::bf16, 203);
    Tensor y = ops::linear(x, w, bias);
    ASSERT_EQ(y.shape(), (Shape{2, 9, 600}));
    expect_linear(x, w, bias, y, 1e-5);
  }
}

TEST(LinearTest, StridedInputsAndWeights) {
  Tensor xbig = random_tensor({5, 3, 40}, Dtype::f32, 301);
  Tensor x = xbig.slice(2, 3, 36).transpose(0, 1);  // [3, 5, 33], not contiguous
  Tensor wbig = random_tensor({30, 50}, Dtype::bf16, 302);
  Tensor w = wbig.slice(0, 2, 29).slice(1, 10, 43);  // [27, 33], row stride 50
  expect_linear(x, w, Tensor(), ops::linear(x, w), 1e-5);
  Tensor wt = random_tensor({33, 27}, Dtype::f32, 303).transpose(0, 1);  // inner stride 27
  for (int64_t tokens : {1, 4, 12}) {
    Tensor xt = random_tensor({tokens, 33}, Dtype::f32, 304);
    expect_linear(xt, wt, Tensor(), ops::linear(xt, wt), 1e-5);
  }
}

TEST(LinearTest, HalfPrecisionActivations) {
  for (int64_t tokens : {1, 3, 12}) {
    Tensor x = random_tensor({tokens, 64}, Dtype::bf16, 401);
    Tensor w = random_tensor({17, 64}, Dtype::bf16, 402);
    Tensor bias = random_tensor({17}, Dtype::bf16, 403);
    Tensor y = ops::linear(x, w, bias);
    ASSERT_EQ(y.dtype(), Dtype::bf16);
    expect_linear(x, w, bias, y, 4e-3);
    Tensor xh = random_tensor({tokens, 64}, Dtype::f16, 404);
    Tensor yh = ops::linear(xh, random_tensor({17, 64}, Dtype::f32, 405));
    ASSERT_EQ(yh.dtype(), Dtype::f16);
  }
}

TEST(LinearTest, Errors) {
  Tensor x = random_tensor({2, 8}, Dtype::f32, 501);
  EXPECT_THROW(ops::linear(x, random_tensor({8}, Dtype::f32, 1)), Error);
  EXPECT_THROW(ops::linear(x, random_tensor({4, 7}, Dtype::f32, 2)), Error);
  EXPECT_THROW(ops::linear(x, random_tensor({4, 8}, Dtype::f32, 3), random_tensor({5}, Dtype::f32, 4)), Error);
  EXPECT_THROW(ops::linear(x, Tensor::zeros({4, 8}, Dtype::i32)), Error);
  EXPECT_THROW(ops::linear(Tensor::zeros({2, 8}, Dtype::i32), random_tensor({4, 8}, Dtype::f32, 5)), Error);
}

}  // namespace
}  // namespace tern
