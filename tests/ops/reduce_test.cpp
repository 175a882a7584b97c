// Reductions against naive loops: softmax / log_softmax (stability, masked rows), sum / mean / max
// with keepdim, argmax and top-k tie rules, along every dim of strided and bf16/f16 inputs.
#include "tern/ops/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "tern/base/draw_weight.h"
#include "tests/ops/ops_test_util.h"

namespace tern {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Uniform in [-4, 4) unless the test says otherwise.
Tensor random(const Shape& shape, Dtype dt, uint32_t seed, float lo = -4.0f, float hi = 4.0f) {
  return ops_test::random_uniform(shape, dt, seed, lo, hi);
}

// Row-major values of x with `dim` moved last: returns [rows][n] and the row count.
// x with dim moved last and the other dims in order, so rows enumerate a reduced output in its own order.
Tensor move_dim_last(const Tensor& x, int64_t dim) {
  int d = normalize_dim(dim, x.rank(), "test");
  std::vector<int64_t> order;
  for (int64_t i = 0; i < static_cast<int64_t>(x.rank()); ++i)
    if (i != d) order.push_back(i);
  order.push_back(d);
  return x.permute(order);
}

std::vector<std::vector<float>> rows_along(const Tensor& x, int64_t dim) {
  int d = normalize_dim(dim, x.rank(), "test");
  std::vector<float> v = move_dim_last(x, dim).to_f32_vector();
  const int64_t n = x.size(d);
  std::vector<std::vector<float>> rows(v.size() / std::max<int64_t>(n, 1));
  for (size_t r = 0; r < rows.size(); ++r) rows[r].assign(v.begin() + r * n, v.begin() + (r + 1) * n);
  return rows;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol, float atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
    }
  }
}

// Reference softmax along dim, flattened in the dim-last order.
std::vector<float> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  std::vector<float> out;
  for (const auto& row : rows_along(x, dim)) {
    double m = -INFINITY, s = 0;
    for (float v : row) m = std::max<double>(m, v);
    for (float v : row) s += std::exp(v - m);
    for (float v : row) out.push_back(static_cast<float>(log ? v - m - std::log(s) : std::exp(v - m) / s));
  }
  return out;
}

std::vector<float> dim_last_values(const Tensor& y, int64_t dim) {
  return move_dim_last(y, dim).to_f32_vector();
}

TEST(Softmax, EveryDimOddSizes) {
  for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{1, 129}, Shape{2, 33, 5}}) {
    Tensor x = random(s, Dtype::f32, static_cast<uint32_t>(numel(s)));
    for (int64_t dim = -1; dim < static_cast<int64_t>(s.size()); ++dim) {
      for (bool log : {false, true}) {
        Tensor y = log ? ops::log_softmax(x, dim) : ops::softmax(x, dim);
        EXPECT_EQ(y.shape(), s);
        expect_close(dim_last_values(y, dim), ref_softmax(x, dim, log), 2e-6f, 1e-7f);
      }
    }
  }
}

TEST(Softmax, StableMaskedAndStrided) {
  std::vector<float> v = {1000.0f, 1001.0f, -kInf, 999.0f, -kInf, -kInf, 0.0f, -kInf};
  Tensor x = Tensor::from_vector(v, {2, 4});
  std::vector<float> y = ops::softmax(x, -1).to_f32_vector();
  expect_close(y, ref_softmax(x, -1, false), 2e-6f, 1e-7f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[6], 1.0f);
  std::vector<float> ly = ops::log_softmax(x, -1).to_f32_vector();
  EXPECT_EQ(ly[4], -kInf);
  EXPECT_EQ(ly[6], 0.0f);
  // Strided rows (transposed) and a huge row through the parallel path.
  Tensor t = random({129, 6}, Dtype::f32, 1).transpose(0, 1);
  expect_close(ops::softmax(t, -1).to_f32_vector(), ref_softmax(t, -1, false), 2e-6f, 1e-7f);
  Tensor big = random({300, 257}, Dtype::f32, 2, -30, 30);
  expect_close(ops::softmax(big, 1).to_f32_vector(), ref_softmax(big, 1, false), 2e-6f, 1e-9f);
  expect_close(ops::log_softmax(big, 1).to_f32_vector(), ref_softmax(big, 1, true), 2e-6f, 2e-6f);
}

TEST(Softmax, HalfDtypes) {
  for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
    Tensor x = random({3, 33}, dt, 3);
    Tensor y = ops::softmax(x, -1);
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y.to_f32_vector(), ref_softmax(x, -1, false), dt == Dtype::bf16 ? 8e-3f : 1e-3f, 1e-6f);
    expect_close(ops::log_softmax(x, 0).transpose(0, 1).to_f32_vector(), ref_softmax(x, 0, true),
                 dt == Dtype::bf16 ? 8e-3f : 1e-3f, 1e-3f);
  }
}

TEST(Reduce, SumMeanMaxKeepdim) {
  for (const Shape& s : {Shape{7}, Shape{3, 33}, Shape{2, 5, 129}}) {
    Tensor x = random(s, Dtype::f32, 4);
    for (int64_t dim = 0; dim < static_cast<int64_t>(s.size()); ++dim) {
      std::vector<float> ws, wm, wx;
      for (const auto& row : rows_along(x, dim)) {
        double sum = 0;
        float mx = -kInf;
        for (float v : row) sum += v, mx = std::max(mx, v);
        ws.push_back(static_cast<float>(sum));
        wm.push_back(static_cast<float>(sum / row.size()));
        wx.push_back(mx);
      }
      Shape keep = s, drop = s;
      keep[dim] = 1;
      drop.erase(drop.begin() + dim);
      EXPECT_EQ(ops::sum(x, dim).shape(), drop);
      EXPECT_EQ(ops::mean(x, dim, true).shape(), keep);
      expect_close(ops::sum(x, dim).to_f32_vector(), ws, 1e-5f, 1e-5f);
      expect_close(ops::mean(x, dim, true).to_f32_vector(), wm, 1e-5f, 1e-6f);
      EXPECT_EQ(ops::max(x, dim, dim % 2 == 0).to_f32_vector(), wx);
    }
  }
}

TEST(Reduce, StridedHalfEmptyAndNaN) {
  Tensor t = random({33, 4}, Dtype::bf16, 5).transpose(0, 1);  // [4, 33], last-dim stride 4
  std::vector<float> want;
  for (const auto& row : rows_along(t, 1)) want.push_back(*std::max_element(row.begin(), row.end()));
  Tensor m = ops::max(t, 1);
  EXPECT_EQ(m.dtype(), Dtype::bf16);
  EXPECT_EQ(m.to_f32_vector(), want);
  Tensor b = Tensor::from_vector(std::vector<float>{2.0f}, {1}).broadcast_to({3, 5});
  EXPECT_EQ(ops::sum(b, 1).to_f32_vector(), (std::vector<float>{10, 10, 10}));
  Tensor e = Tensor::empty({3, 0}, Dtype::f32);
  EXPECT_EQ(ops::sum(e, 1).to_f32_vector(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(ops::mean(e, 1).to_f32_vector()[0]));
  EXPECT_THROW(ops::max(e, 1), Error);
  Tensor n = Tensor::from_vector(std::vector<float>{1.0f, NAN, 3.0f}, {3});
  EXPECT_TRUE(std::isnan(ops::max(n, 0).item<float>()));
}

TEST(Argmax, FirstIndexOnTies) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 5, 5, 2, -1, -1, -1, -1, 0, 7, 3, 7}, {3, 4});
  Tensor a = ops::argmax(x, -1);
  EXPECT_EQ(a.dtype(), Dtype::i32);
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.to_f32_vector(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(ops::argmax(x, 0).to_f32_vector(), (std::vector<float>{0, 2, 0, 2}));
  Tensor n = Tensor::from_vector(std::vector<float>{1.0f, NAN, 9.0f, NAN}, {4});
  EXPECT_EQ(ops::argmax(n).item<int>(), 1);  // NaN ranks highest, as torch.argmax
}

TEST(Argmax, OddSizesStridedHalf) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (int64_t n : {1, 7, 129, 1001}) {
      Tensor x = random({n, 5}, dt, static_cast<uint32_t>(n)).transpose(0, 1);
      std::vector<float> want;
      for (const auto& row : rows_along(x, 1)) {
        want.push_back(static_cast<float>(std::max_element(row.begin(), row.end()) - row.begin()));
      }
      EXPECT_EQ(ops::argmax(x, 1).to_f32_vector(), want);
    }
  }
}

// The greedy choice: the first index of each row's max, and its log-probability against a naive
// log-sum-exp in double; rows with ties (coarse grid), one row of a single logit, and a row of -inf but one.
TEST(GreedyChoice, FirstMaxAndItsLogProbability) {
  for (int64_t n : {1, 9, 1000, 40000}) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_int_distribution<int> grid(-8, 8);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const int64_t rows = 3;
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < n; ++i) {
      v[i] = static_cast<float>(grid(rng)) * 0.5f;  // many ties
      v[n + i] = normal(rng);
      v[2 * n + i] = i == n / 2 ? 1.0f : -kInf;
    }
    Tensor x = Tensor::from_vector(v, {rows, n});
    Tensor ids = Tensor::empty({rows}, Dtype::i32), lp = Tensor::empty({rows}, Dtype::f32);
    ops::greedy_choice(x, ids, lp);
    for (int64_t r = 0; r < rows; ++r) {
      SCOPED_TRACE("n " + std::to_string(n) + " row " + std::to_string(r));
      const float* row = v.data() + r * n;
      const int64_t best = std::max_element(row, row + n) - row;  // the first of equal maxima
      double z = 0.0;
      for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i]) - row[best]);
      EXPECT_EQ(ids.data<int32_t>()[r], best);
      EXPECT_NEAR(lp.data<float>()[r], -std::log(z), 1e-5 * std::max(1.0, std::log(z)));
    }
    EXPECT_EQ(lp.data<float>()[2], 0.0f);  // one finite logit: probability 1
  }
  Tensor x = random({2, 5}, Dtype::f32, 3);
  Tensor ids = Tensor::empty({2}, Dtype::i32), lp = Tensor::empty({2}, Dtype::f32);
  EXPECT_THROW(ops::greedy_choice(random({2, 5}, Dtype::bf16, 3), ids, lp), Error);
  EXPECT_THROW(ops::greedy_choice(x.transpose(0, 1), ids, lp), Error);
  Tensor three = Tensor::empty({3}, Dtype::i32);
  EXPECT_THROW(ops::greedy_choice(x, three, lp), Error);
  EXPECT_THROW(ops::greedy_choice(x, lp, ids), Error);
}

// Teacher-forced log-probabilities against a naive log-sum-exp in double over the row as the dtype
// holds it: several vocab sizes, f32 and bf16, a row of -inf but its target, and bad targets.
TEST(TokenLogprobs, TargetLogitMinusTheRowsLogSumExp) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    for (int64_t n : {1, 9, 1000, 40000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      const int64_t rows = 4;
      Tensor x = random({rows, n}, dt, static_cast<uint32_t>(n) + 5, -8.0f, 8.0f);
      std::vector<int32_t> t(rows);
      std::mt19937 rng(static_cast<uint32_t>(n));
      for (auto& id : t) id = static_cast<int32_t>(rng() % n);
      const Tensor lp = ops::token_logprobs(x, Tensor::from_vector(t, {rows}));
      ASSERT_EQ(lp.shape(), Shape{rows});
      ASSERT_EQ(lp.dtype(), Dtype::f32);
      const std::vector<float> xs = x.to_f32_vector();
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = xs.data() + r * n;
        const double m = *std::max_element(row, row + n);
        double z = 0.0;
        for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i]) - m);
        const double want = row[t[r]] - m - std::log(z);
        EXPECT_NEAR(lp.data<float>()[r], want, 1e-6 * std::max(1.0, std::fabs(want)));
      }
    }
  }
  // One finite logit in a row of -inf: probability 1 for it.
  std::vector<float> v(50, -kInf);
  v[17] = 3.0f;
  EXPECT_EQ(ops::token_logprobs(Tensor::from_vector(v, {1, 50}), Tensor::from_vector(std::vector<int32_t>{17}, {1}))
                .data<float>()[0],
            0.0f);
  const Tensor x = random({2, 5}, Dtype::f32, 3);
  EXPECT_THROW(ops::token_logprobs(x, Tensor::from_vector(std::vector<int32_t>{0, 5}, {2})), Error);   // past the vocab
  EXPECT_THROW(ops::token_logprobs(x, Tensor::from_vector(std::vector<int32_t>{-1, 0}, {2})), Error);  // negative
  EXPECT_THROW(ops::token_logprobs(x, Tensor::from_vector(std::vector<int32_t>{0}, {1})), Error);      // one per row
  EXPECT_THROW(ops::token_logprobs(x, Tensor::zeros({2}, Dtype::f32)), Error);                          // i32 ids
  EXPECT_THROW(ops::token_logprobs(random({2, 5, 1}, Dtype::f32, 3), Tensor::zeros({2}, Dtype::i32)), Error);
}

// Reference top-k of one row: indices sorted by value descending, ties by lower index.
std::vector<int> ref_topk(const std::vector<float>& row, int64_t k) {
  std::vector<int> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return row[a] > row[b]; });
  idx.resize(k);
  return idx;
}

TEST(TopK, SortedWithTiesAlongEveryDim) {
  Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 3, 2, 3, 0, -1, 2}, {8});
  ops::TopK r = ops::topk(x, 4);
  EXPECT_EQ(r.values.to_f32_vector(), (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(r.indices.dtype(), Dtype::i32);
  EXPECT_EQ(r.indices.to_f32_vector(), (std::vector<float>{0, 2, 4, 3}));

  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    // bf16 has few distinct values in [-4, 4): plenty of ties.
    Tensor y = random({4, 33, 7}, dt, 6);
    for (int64_t dim : {0, 1, 2}) {
      for (int64_t k : {int64_t{1}, y.size(dim) / 2, y.size(dim)}) {
        ops::TopK t = ops::topk(y, k, dim);
        Shape want_shape = y.shape();
        want_shape[dim] = k;
        EXPECT_EQ(t.values.shape(), want_shape);
        EXPECT_EQ(t.values.dtype(), dt);
        std::vector<float> wv, wi;
        for (const auto& row : rows_along(y, dim)) {
          for (int i : ref_topk(row, k)) {
            wv.push_back(row[i]);
            wi.push_back(static_cast<float>(i));
          }
        }
        EXPECT_EQ(dim_last_values(t.values, dim), wv) << "dim " << dim << " k " << k;
        EXPECT_EQ(dim_last_values(t.indices, dim), wi) << "dim " << dim << " k " << k;
      }
    }
  }
}

TEST(TopK, StridedAndEdgeK) {
  Tensor x = random({129, 3}, Dtype::f32, 7).transpose(0, 1);
  ops::TopK t = ops::topk(x, 5);
  std::vector<float> wi;
  for (const auto& row : rows_along(x, 1)) {
    for (int i : ref_topk(row, 5)) wi.push_back(static_cast<float>(i));
  }
  EXPECT_EQ(t.indices.to_f32_vector(), wi);
  EXPECT_EQ(ops::topk(x, 0).values.shape(), (Shape{3, 0}));
  Tensor n = Tensor::from_vector(std::vector<float>{1.0f, NAN, 9.0f}, {3});
  EXPECT_EQ(ops::topk(n, 2).indices.to_f32_vector(), (std::vector<float>{1, 2}));
  EXPECT_THROW(ops::topk(x, 130), Error);
  EXPECT_THROW(ops::topk(x, -1), Error);
}

TEST(Reduce, BadInput) {
  Tensor i = Tensor::zeros({3, 4}, Dtype::i32);
  EXPECT_THROW(ops::softmax(i), Error);
  EXPECT_THROW(ops::sum(i, 0), Error);
  EXPECT_THROW(ops::argmax(i), Error);
  EXPECT_THROW(ops::topk(i, 1), Error);
  Tensor x = random({3, 4}, Dtype::f32, 8);
  try {
    ops::softmax(x, 2);
    FAIL() << "expected a dim error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[softmax] expected dim in [-2, 2), got 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::mean(x, -3), Error);
  EXPECT_THROW(ops::argmax(Tensor::empty({3, 0}, Dtype::f32), 1), Error);
  EXPECT_THROW(ops::softmax(Tensor()), Error);
}

// The message f throws, or "no error".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

// The row draw: the inverse CDF in id order (0.25 / 0.5 / 0.25 with -inf holes that weigh nothing),
// and one message for each input it cannot take.
TEST(Reduce, DrawIndexWalksTheCdfInIdOrder) {
  const float q = std::log(0.25f), h = std::log(0.5f);
  Tensor row = Tensor::from_vector(std::vector<float>{-INFINITY, q, h, -INFINITY, q}, {5});
  auto draw = [&](float u) { return ops::draw_index(row, h, u).item<int32_t>(); };
  EXPECT_EQ(draw(0.0f), 1);
  EXPECT_EQ(draw(0.24f), 1);
  EXPECT_EQ(draw(0.26f), 2);
  EXPECT_EQ(draw(0.74f), 2);
  EXPECT_EQ(draw(0.76f), 4);
  EXPECT_EQ(draw(std::nextafter(1.0f, 0.0f)), 4);
  EXPECT_NE(error_of([&] { ops::draw_index(row, h, 1.0f); }).find("[draw_index] expected u in [0, 1), got 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::draw_index(row, INFINITY, 0.5f); }).find("expected a finite max logit, got inf"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::draw_index(row.view({1, 5}), h, 0.5f); }).find("expected f32 logits [n], got f32 [1, 5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::draw_index(Tensor::empty({0}, Dtype::f32), 0.0f, 0.5f); })
                .find("expected 1 to 8388607 logits, got 0"),
            std::string::npos);
  // The max as a tensor (as topk gives it): the same ids; one that is not finite draws the last id.
  for (float u : {0.0f, 0.3f, 0.9f}) {
    EXPECT_EQ(ops::draw_index(row, Tensor::full({1}, h, Dtype::f32), u).item<int32_t>(), draw(u)) << u;
  }
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    EXPECT_EQ(ops::draw_index(row, Tensor::full({1}, bad, Dtype::f32), 0.5f).item<int32_t>(), 4) << bad;
  }
  EXPECT_NE(error_of([&] { ops::draw_index(row, Tensor::full({2}, h, Dtype::f32), 0.5f); })
                .find("[draw_index] expected the max as one f32 on cpu, got f32 [2] on cpu"),
            std::string::npos);
}

// The top-p target in integers: ceil(floor(p * 2^64) * total / 2^64), at least 1; p = 1 targets the
// whole total.
TEST(Reduce, TopPTargetIsTheCeilingOfTheScaledTotal) {
  EXPECT_EQ(top_p_fraction(0.5f), uint64_t(1) << 63);
  EXPECT_EQ(top_p_target(top_p_fraction(0.5f), 10), 5u);
  EXPECT_EQ(top_p_target(top_p_fraction(0.5f), 11), 6u);
  EXPECT_EQ(top_p_target(top_p_fraction(0.25f), uint64_t(1) << 62), uint64_t(1) << 60);
  EXPECT_EQ(top_p_target(top_p_fraction(1.0f), 12345), 12345u);
  EXPECT_EQ(top_p_target(top_p_fraction(1e-30f), 1000), 1u);  // the best token is always kept
  // 0.1f is 13421773 * 2^-27 exactly, so the fraction is 13421773 * 2^37.
  EXPECT_EQ(top_p_fraction(0.1f), uint64_t(13421773) << 37);
  const uint64_t total = (uint64_t(1) << 40) * 3 + 7;
  const unsigned __int128 exact = static_cast<unsigned __int128>(uint64_t(13421773) << 37) * total;
  EXPECT_EQ(top_p_target(top_p_fraction(0.1f), total), static_cast<uint64_t>((exact >> 64) + 1));
}

// The nucleus mask: the best-first prefix whose weights before each token stay under the target, ties
// kept in id order, min-p on top; -inf holes weigh nothing.
TEST(Reduce, TopPMaskKeepsTheIntegerNucleus) {
  // Probabilities .10 .30 .05 .40 .15 (best first: ids 3, 1, 4, 0, 2) and a -inf hole at id 5.
  std::vector<float> l;
  for (double p : {0.10, 0.30, 0.05, 0.40, 0.15}) l.push_back(static_cast<float>(std::log(p)));
  l.push_back(-INFINITY);
  const float m = l[3];
  Tensor row = Tensor::from_vector(l, {6});
  auto kept = [&](float top_p, float gap = -INFINITY) {
    std::vector<float> out = ops::top_p_mask(row, Tensor::full({1}, m, Dtype::f32), top_p, gap).to_f32_vector();
    std::vector<int> ids;
    for (int i = 0; i < 6; ++i) {
      if (out[i] != -INFINITY) {
        EXPECT_EQ(out[i], l[i]);
        ids.push_back(i);
      }
    }
    return ids;
  };
  EXPECT_EQ(kept(0.39f), (std::vector<int>{3}));
  EXPECT_EQ(kept(0.41f), (std::vector<int>{1, 3}));  // the mass before id 1 is .40 < .41
  EXPECT_EQ(kept(0.69f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept(0.71f), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(kept(0.96f), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(kept(1.0f), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(kept(1e-6f), (std::vector<int>{3}));
  EXPECT_EQ(kept(1.0f, std::log(0.3f)), (std::vector<int>{1, 3, 4}));  // min-p 0.3: p >= .12
  EXPECT_EQ(kept(0.71f, std::log(0.5f)), (std::vector<int>{1, 3}));
  // Nine tied best logits (ids 3-11, weight 2^40 each) and four weaker ones (total about 9.42 * 2^40):
  // top_p 0.35 targets about 3.3 * 2^40, so four of the ties are kept, the four lowest ids.
  std::vector<float> ties(13, -1.0f);
  ties[12] = -2.0f;
  ties[0] = ties[1] = ties[2] = -5.0f;
  Tensor tie_row = Tensor::from_vector(ties, {13});
  std::vector<float> got = ops::top_p_mask(tie_row, Tensor::full({1}, -1.0f, Dtype::f32), 0.35f).to_f32_vector();
  std::vector<int> ids;
  for (int i = 0; i < 13; ++i) {
    if (got[i] != -INFINITY) ids.push_back(i);
  }
  EXPECT_EQ(ids, (std::vector<int>{3, 4, 5, 6}));
  // A max that is not finite returns the row; bad arguments get one message each.
  std::vector<float> same = ops::top_p_mask(row, Tensor::full({1}, NAN, Dtype::f32), 0.5f).to_f32_vector();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(same[i], l[i]);
  const Tensor mt = Tensor::full({1}, m, Dtype::f32);
  EXPECT_NE(error_of([&] { ops::top_p_mask(row, mt, 0.0f); }).find("[top_p_mask] expected top_p in (0, 1], got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::top_p_mask(row, mt, 0.5f, NAN); }).find("expected a min_gap that is not NaN"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::top_p_mask(row.view({2, 3}), mt, 0.5f); }).find("[top_p_mask] expected f32 logits [n]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::top_p_mask(row, Tensor::full({2}, m, Dtype::f32), 0.5f); })
                .find("[top_p_mask] expected the max as one f32 on cpu, got f32 [2] on cpu"),
            std::string::npos);
}

}  // namespace
}  // namespace tern

// Reducing a leading dim of a rank-3 tensor keeps the remaining dims in order.
TEST(ReduceLeadingDim, SumMaxArgmaxOverDimZeroOfRank3) {
  const int64_t A = 4, B = 7, C = 33;
  std::vector<float> v(A * B * C);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  tern::Tensor x = tern::Tensor::from_vector(v, {A, B, C});
  for (int64_t dim : {0, 1}) {
    tern::Tensor s = tern::ops::sum(x, dim), m = tern::ops::max(x, dim), am = tern::ops::argmax(x, dim);
    std::vector<float> sv = s.to_f32_vector(), mv = m.to_f32_vector(), av = am.to_f32_vector();
    const int64_t n = dim == 0 ? A : B, outer_b = dim == 0 ? B : A;
    for (int64_t p = 0; p < outer_b; ++p) {
      for (int64_t c = 0; c < C; ++c) {
        double sum = 0;
        float best = -1e30f;
        int64_t best_i = 0;
        for (int64_t r = 0; r < n; ++r) {
          const int64_t a = dim == 0 ? r : p, b = dim == 0 ? p : r;
          const float e = v[(a * B + b) * C + c];
          sum += e;
          if (e > best) { best = e; best_i = r; }
        }
        const int64_t o = p * C + c;
        EXPECT_NEAR(sv[o], sum, 1e-3) << "dim " << dim << " at " << o;
        EXPECT_EQ(mv[o], best) << "dim " << dim << " at " << o;
        EXPECT_EQ(av[o], static_cast<float>(best_i)) << "dim " << dim << " at " << o;
      }
    }
  }
}
