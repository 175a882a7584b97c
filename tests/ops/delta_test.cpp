// Gated DeltaNet ops against plain double-precision loops: l2norm, the causal conv1d with history
// (one call equals the same inputs split over calls), and the gated delta rule in both forms, with a
// non-zero initial state, grouped value heads and chunks that do not divide the length; bad input.
#include "tern/ops/delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tern {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void expect_close(const Tensor& got, const std::vector<double>& want, double atol, const std::string& what) {
  std::vector<float> g = got.contiguous().to_f32_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - want[i]) / (1.0 + std::fabs(want[i])));
  EXPECT_LE(worst, atol) << what;
}

TEST(L2Norm, MatchesLoop) {
  for (int64_t d : {1, 16, 33}) {
    std::vector<float> x = uniform(5 * d, static_cast<uint32_t>(d), -2, 2);
    Tensor y = ops::l2norm(Tensor::from_vector(x, {5, d}), 1e-6f);
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < 5; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
      for (int64_t i = 0; i < d; ++i) want[r * d + i] = x[r * d + i] / std::sqrt(ss + 1e-6);
    }
    expect_close(y, want, 1e-6, "d " + std::to_string(d));
  }
  // A zero row stays zero (eps keeps the norm finite).
  Tensor z = ops::l2norm(Tensor::zeros({2, 4}, Dtype::f32), 1e-6f);
  for (float v : z.to_f32_vector()) EXPECT_EQ(v, 0.0f);
}

// cat(history, x) convolved with weight, in double; returns out and the next history.
std::pair<std::vector<double>, std::vector<double>> naive_conv(const std::vector<float>& x, const std::vector<float>& w,
                                                                const std::vector<float>& hist, int64_t B, int64_t L,
                                                                int64_t C, int64_t K) {
  std::vector<double> out(B * L * C), next(B * (K - 1) * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> xx;
      for (int64_t s = 0; s < K - 1; ++s) xx.push_back(hist[(b * (K - 1) + s) * C + c]);
      for (int64_t t = 0; t < L; ++t) xx.push_back(x[(b * L + t) * C + c]);
      for (int64_t t = 0; t < L; ++t) {
        double acc = 0;
        for (int64_t j = 0; j < K; ++j) acc += double(w[c * K + j]) * xx[t + j];
        out[(b * L + t) * C + c] = acc;
      }
      for (int64_t s = 0; s < K - 1; ++s) next[(b * (K - 1) + s) * C + c] = xx[L + s];
    }
  return {out, next};
}

TEST(CausalConv1d, MatchesLoopWithHistory) {
  const int64_t B = 2, C = 6, K = 4;
  for (int64_t L : {1, 2, 3, 9}) {
    std::vector<float> x = uniform(B * L * C, 1 + L, -1, 1), w = uniform(C * K, 2, -1, 1);
    std::vector<float> hist = uniform(B * (K - 1) * C, 3, -1, 1);
    Tensor h = Tensor::from_vector(hist, {B, K - 1, C});
    Tensor y = ops::causal_conv1d(Tensor::from_vector(x, {B, L, C}), Tensor::from_vector(w, {C, K}), h);
    auto [want, next] = naive_conv(x, w, hist, B, L, C, K);
    expect_close(y, want, 1e-6, "out L " + std::to_string(L));
    expect_close(h, next, 0, "history L " + std::to_string(L));
  }
}

TEST(CausalConv1d, SplitCallsEqualOneCall) {
  const int64_t B = 1, L = 7, C = 3, K = 4;
  std::vector<float> x = uniform(B * L * C, 5, -1, 1), w = uniform(C * K, 6, -1, 1);
  Tensor wt = Tensor::from_vector(w, {C, K}), xt = Tensor::from_vector(x, {B, L, C});
  Tensor h1 = Tensor::zeros({B, K - 1, C}, Dtype::f32), h2 = Tensor::zeros({B, K - 1, C}, Dtype::f32);
  std::vector<float> whole = ops::causal_conv1d(xt, wt, h1).to_f32_vector();
  std::vector<float> parts;
  for (auto [s, e] : {std::pair<int64_t, int64_t>{0, 2}, {2, 3}, {3, 7}}) {
    std::vector<float> p = ops::causal_conv1d(xt.slice(1, s, e), wt, h2).to_f32_vector();
    parts.insert(parts.end(), p.begin(), p.end());
  }
  EXPECT_EQ(whole, parts);
  EXPECT_EQ(h1.to_f32_vector(), h2.to_f32_vector());
}

struct DeltaCase {
  int64_t B, L, Hk, Hv, Dk, Dv;
};

struct DeltaInputs {
  std::vector<float> q, k, v, g, beta, state;
};

DeltaInputs random_delta(const DeltaCase& c, uint32_t seed) {
  DeltaInputs in;
  in.q = uniform(c.B * c.L * c.Hk * c.Dk, seed, -0.5f, 0.5f);
  in.k = uniform(c.B * c.L * c.Hk * c.Dk, seed + 1, -0.5f, 0.5f);
  in.v = uniform(c.B * c.L * c.Hv * c.Dv, seed + 2, -1.0f, 1.0f);
  in.g = uniform(c.B * c.L * c.Hv, seed + 3, -1.5f, 0.0f);
  in.beta = uniform(c.B * c.L * c.Hv, seed + 4, 0.0f, 1.0f);
  in.state = uniform(c.B * c.Hv * c.Dk * c.Dv, seed + 5, -0.5f, 0.5f);
  return in;
}

// The recurrence as written in the reference, in double: returns outputs, updates state.
std::vector<double> naive_delta(const DeltaCase& c, const DeltaInputs& in, std::vector<double>& S) {
  std::vector<double> out(c.B * c.L * c.Hv * c.Dv);
  const int64_t rep = c.Hv / c.Hk;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hv; ++h) {
      double* s = S.data() + (b * c.Hv + h) * c.Dk * c.Dv;
      for (int64_t t = 0; t < c.L; ++t) {
        const float* q = in.q.data() + ((b * c.L + t) * c.Hk + h / rep) * c.Dk;
        const float* k = in.k.data() + ((b * c.L + t) * c.Hk + h / rep) * c.Dk;
        const float* v = in.v.data() + ((b * c.L + t) * c.Hv + h) * c.Dv;
        const double decay = std::exp(double(in.g[(b * c.L + t) * c.Hv + h])), beta = in.beta[(b * c.L + t) * c.Hv + h];
        for (int64_t i = 0; i < c.Dk * c.Dv; ++i) s[i] *= decay;
        for (int64_t j = 0; j < c.Dv; ++j) {
          double mem = 0;
          for (int64_t i = 0; i < c.Dk; ++i) mem += s[i * c.Dv + j] * k[i];
          const double delta = (v[j] - mem) * beta;
          for (int64_t i = 0; i < c.Dk; ++i) s[i * c.Dv + j] += k[i] * delta;
        }
        for (int64_t j = 0; j < c.Dv; ++j) {
          double o = 0;
          for (int64_t i = 0; i < c.Dk; ++i) o += s[i * c.Dv + j] * q[i];
          out[((b * c.L + t) * c.Hv + h) * c.Dv + j] = o;
        }
      }
    }
  return out;
}

void check_delta(const DeltaCase& c, ops::DeltaRuleAlgo algo, int64_t chunk) {
  DeltaInputs in = random_delta(c, static_cast<uint32_t>(c.L * 7 + c.Hv));
  std::vector<double> S(in.state.begin(), in.state.end());
  std::vector<double> want = naive_delta(c, in, S);
  Tensor state = Tensor::from_vector(in.state, {c.B, c.Hv, c.Dk, c.Dv});
  Tensor o = ops::gated_delta_rule(
      Tensor::from_vector(in.q, {c.B, c.L, c.Hk, c.Dk}), Tensor::from_vector(in.k, {c.B, c.L, c.Hk, c.Dk}),
      Tensor::from_vector(in.v, {c.B, c.L, c.Hv, c.Dv}), Tensor::from_vector(in.g, {c.B, c.L, c.Hv}),
      Tensor::from_vector(in.beta, {c.B, c.L, c.Hv}), state, algo, chunk);
  const std::string what = std::string(algo == ops::DeltaRuleAlgo::recurrent ? "recurrent" : "chunked") + " L " +
                           std::to_string(c.L) + " chunk " + std::to_string(chunk);
  ASSERT_EQ(o.shape(), (Shape{c.B, c.L, c.Hv, c.Dv}));
  expect_close(o, want, 1e-5, what + " out");
  expect_close(state, S, 1e-5, what + " state");
}

TEST(GatedDeltaRule, RecurrentMatchesLoop) {
  for (int64_t L : {1, 5, 40}) check_delta({2, L, 2, 4, 8, 6}, ops::DeltaRuleAlgo::recurrent, 0);
  check_delta({1, 9, 3, 3, 5, 7}, ops::DeltaRuleAlgo::recurrent, 0);
}

TEST(GatedDeltaRule, ChunkedMatchesLoop) {
  for (int64_t L : {1, 3, 4, 5, 17, 40}) check_delta({2, L, 2, 4, 8, 6}, ops::DeltaRuleAlgo::chunked, 4);
  check_delta({1, 70, 1, 2, 5, 7}, ops::DeltaRuleAlgo::chunked, 64);
}

TEST(GatedDeltaRule, BadInputIsAClearError) {
  Tensor q = Tensor::zeros({1, 2, 2, 4}, Dtype::f32), v = Tensor::zeros({1, 2, 3, 4}, Dtype::f32);
  Tensor g = Tensor::zeros({1, 2, 3}, Dtype::f32), st = Tensor::zeros({1, 3, 4, 4}, Dtype::f32);
  EXPECT_THROW(ops::gated_delta_rule(q, q, v, g, g, st, ops::DeltaRuleAlgo::recurrent), Error);  // 3 % 2 != 0
  Tensor v4 = Tensor::zeros({1, 2, 4, 4}, Dtype::f32), g4 = Tensor::zeros({1, 2, 4}, Dtype::f32);
  Tensor bad_state = Tensor::zeros({1, 4, 4, 5}, Dtype::f32);
  EXPECT_THROW(ops::gated_delta_rule(q, q, v4, g4, g4, bad_state, ops::DeltaRuleAlgo::chunked), Error);
  Tensor h = Tensor::zeros({1, 2, 3}, Dtype::f32);
  EXPECT_THROW(ops::causal_conv1d(Tensor::zeros({1, 2, 3}, Dtype::f32), Tensor::zeros({4, 3}, Dtype::f32), h), Error);
  EXPECT_THROW(ops::causal_conv1d(Tensor::zeros({1, 2, 3}, Dtype::bf16), Tensor::zeros({3, 3}, Dtype::f32), h), Error);
}

}  // namespace
}  // namespace tern
