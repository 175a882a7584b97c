// ops::moe_experts on the CPU against a plain per-token, per-slot loop in double precision: both
// activations, f32 and bf16 expert weights, experts hit unevenly (some with no tokens); bad input; a bf16
// output; ops::moe_norm_route against a plain loop.
#include "tern/ops/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tern/ops/elementwise.h"

namespace tern {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// k distinct experts per token drawn from the first `reach` of E (so experts >= reach get no tokens),
// with weights in (0, 1).
void random_route(int64_t T, int64_t k, int64_t reach, uint32_t seed, std::vector<int32_t>& ids,
                  std::vector<float>& wts) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  ids.clear();
  wts.clear();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> pool(static_cast<size_t>(reach));
    for (int64_t e = 0; e < reach; ++e) pool[e] = static_cast<int32_t>(e);
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t j = 0; j < k; ++j) {
      ids.push_back(pool[j]);
      wts.push_back(u(rng));
    }
  }
}

double act_d(double g, ops::MoeActivation act) {
  if (act == ops::MoeActivation::swiglu) return g / (1.0 + std::exp(-g));
  return 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

// The definition, token by token and slot by slot, on the same (possibly bf16-rounded) weight values.
std::vector<double> naive(const std::vector<float>& x, const std::vector<int32_t>& ids, const std::vector<float>& wts,
                          const std::vector<float>& gu, const std::vector<float>& dn, int64_t T, int64_t k, int64_t H,
                          int64_t I, ops::MoeActivation act) {
  std::vector<double> out(static_cast<size_t>(T * H), 0.0);
  std::vector<double> h(static_cast<size_t>(I));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j];
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < H; ++c) {
          g += double(gu[(e * 2 * I + i) * H + c]) * x[t * H + c];
          u += double(gu[(e * 2 * I + I + i) * H + c]) * x[t * H + c];
        }
        h[i] = act_d(g, act) * u;
      }
      for (int64_t c = 0; c < H; ++c) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += double(dn[(e * H + c) * I + i]) * h[i];
        out[t * H + c] += wts[t * k + j] * y;
      }
    }
  }
  return out;
}

TEST(MoeExperts, MatchesPerTokenLoop) {
  const int64_t H = 24, I = 16;
  uint32_t seed = 1;
  for (int64_t E : {1, 4, 9}) {
    for (int64_t k : {1, 2, 3}) {
      if (k > E) continue;
      for (int64_t T : {1, 5, 17}) {
        for (ops::MoeActivation act : {ops::MoeActivation::swiglu, ops::MoeActivation::geglu_tanh}) {
          for (Dtype wdt : {Dtype::f32, Dtype::bf16}) {
            ++seed;
            const int64_t reach = std::max<int64_t>(k, E - 2);  // the last experts stay idle when E > k + 1
            std::vector<int32_t> ids;
            std::vector<float> wts;
            random_route(T, k, reach, seed, ids, wts);
            std::vector<float> x = randn(T * H, seed + 100, 1.0f);
            Tensor gu = Tensor::from_vector(randn(E * 2 * I * H, seed + 200, 0.3f), {E, 2 * I, H});
            Tensor dn = Tensor::from_vector(randn(E * H * I, seed + 300, 0.3f), {E, H, I});
            if (wdt == Dtype::bf16) {
              gu = ops::cast(gu, Dtype::bf16);
              dn = ops::cast(dn, Dtype::bf16);
            }
            Tensor got = ops::moe_experts(Tensor::from_vector(x, {T, H}), Tensor::from_vector(ids, {T, k}),
                                          Tensor::from_vector(wts, {T, k}), gu, dn, act);
            ASSERT_EQ(shape_str(got.shape()), shape_str(Shape{T, H}));
            ASSERT_EQ(got.dtype(), Dtype::f32);
            std::vector<double> want =
                naive(x, ids, wts, gu.to_f32_vector(), dn.to_f32_vector(), T, k, H, I, act);
            std::vector<float> g = got.to_f32_vector();
            double worst = 0;
            for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - want[i]) / (1.0 + std::fabs(want[i])));
            EXPECT_LE(worst, 1e-5) << "E " << E << " k " << k << " T " << T << " act " << int(act) << " "
                                   << dtype_name(wdt);
          }
        }
      }
    }
  }
}

TEST(MoeExperts, ZeroWeightSlotAddsNothing) {
  // A slot with weight 0 contributes nothing; with both slots on one token it is that expert alone.
  const int64_t H = 8, I = 8, E = 3;
  Tensor gu = Tensor::from_vector(randn(E * 2 * I * H, 7, 0.5f), {E, 2 * I, H});
  Tensor dn = Tensor::from_vector(randn(E * H * I, 8, 0.5f), {E, H, I});
  Tensor x = Tensor::from_vector(randn(H, 9, 1.0f), {1, H});
  Tensor both = ops::moe_experts(x, Tensor::from_vector(std::vector<int32_t>{2, 0}, {1, 2}),
                                 Tensor::from_vector(std::vector<float>{1.0f, 0.0f}, {1, 2}), gu, dn,
                                 ops::MoeActivation::swiglu);
  Tensor one = ops::moe_experts(x, Tensor::from_vector(std::vector<int32_t>{2}, {1, 1}),
                                Tensor::from_vector(std::vector<float>{1.0f}, {1, 1}), gu, dn,
                                ops::MoeActivation::swiglu);
  EXPECT_EQ(both.to_f32_vector(), one.to_f32_vector());
}

TEST(MoeExperts, RejectsBadInput) {
  const int64_t H = 8, I = 4, E = 2;
  Tensor gu = Tensor::zeros({E, 2 * I, H}, Dtype::f32), dn = Tensor::zeros({E, H, I}, Dtype::f32);
  Tensor x = Tensor::zeros({3, H}, Dtype::f32);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 1, 1}, {3, 1});
  Tensor w = Tensor::from_vector(std::vector<float>{1, 1, 1}, {3, 1});
  const auto sw = ops::MoeActivation::swiglu;
  EXPECT_NO_THROW(ops::moe_experts(x, ids, w, gu, dn, sw));
  EXPECT_THROW(ops::moe_experts(Tensor::zeros({3, H + 1}, Dtype::f32), ids, w, gu, dn, sw), Error);  // hidden
  EXPECT_THROW(ops::moe_experts(x, ids, w, gu, Tensor::zeros({E, H, I + 1}, Dtype::f32), sw), Error);  // inter
  EXPECT_THROW(ops::moe_experts(x, ids, w, gu, Tensor::zeros({E + 1, H, I}, Dtype::f32), sw), Error);  // E
  EXPECT_THROW(ops::moe_experts(x, ids.view({1, 3}), w, gu, dn, sw), Error);                         // rows
  EXPECT_THROW(ops::moe_experts(x, ops::cast(ids, Dtype::i64), w, gu, dn, sw), Error);               // id dtype
  EXPECT_THROW(ops::moe_experts(x, Tensor::from_vector(std::vector<int32_t>{0, 2, 1}, {3, 1}), w, gu, dn, sw),
               Error);  // expert id out of range
  EXPECT_THROW(ops::moe_experts(x, ids, w, ops::cast(gu, Dtype::bf16), dn, sw), Error);  // mixed weight dtypes
}

TEST(MoeExperts, Bf16OutputIsTheF32OneRounded) {
  const int64_t T = 5, H = 16, I = 8, E = 4;
  Tensor gu = Tensor::from_vector(randn(E * 2 * I * H, 17, 0.5f), {E, 2 * I, H});
  Tensor dn = Tensor::from_vector(randn(E * H * I, 18, 0.5f), {E, H, I});
  Tensor x = Tensor::from_vector(randn(T * H, 19, 1.0f), {T, H});
  std::vector<int32_t> ids;
  std::vector<float> wts;
  random_route(T, 2, E, 20, ids, wts);
  Tensor e = Tensor::from_vector(ids, {T, 2}), w = Tensor::from_vector(wts, {T, 2});
  const auto sw = ops::MoeActivation::swiglu;
  Tensor f = ops::moe_experts(x, e, w, gu, dn, sw), b = ops::moe_experts(x, e, w, gu, dn, sw, Dtype::bf16);
  ASSERT_EQ(b.dtype(), Dtype::bf16);
  EXPECT_EQ(ops::cast(f, Dtype::bf16).to_f32_vector(), b.to_f32_vector());
  EXPECT_THROW(ops::moe_experts(x, e, w, gu, dn, sw, Dtype::f16), Error);
}

// ops::moe_norm_route on the CPU against a plain loop in double: the residual sum, the RMSNorm with its
// weight, the router's softmax and its top k (renormalised), with and without a delta.
TEST(MoeNormRoute, IsThePreNormThenTheRouter) {
  const int64_t T = 3, H = 24, E = 16, k = 4;
  const float eps = 1e-6f;
  const std::vector<float> xv = randn(T * H, 30, 1.0f), dv = randn(T * H, 31, 0.5f), nw = randn(H, 32, 0.3f),
                           rv = randn(E * H, 33, 0.4f);
  std::vector<float> wv(nw);
  for (float& v : wv) v += 1.0f;
  for (bool with_delta : {true, false}) {
    ops::PreNorm in;
    in.x = Tensor::from_vector(xv, {T, 1, H});
    if (with_delta) in.delta = Tensor::from_vector(dv, {T, 1, H});
    in.weight = Tensor::from_vector(wv, {H});
    in.eps = eps;
    ops::MoeNormRoute r = ops::moe_norm_route(in, Tensor::from_vector(rv, {E, H}), k, true);
    ASSERT_EQ(r.sum.shape(), (Shape{T, 1, H}));
    ASSERT_EQ(r.normed.shape(), (Shape{T, 1, H}));
    ASSERT_EQ(r.experts.shape(), (Shape{T, k}));
    const std::vector<float> sum = r.sum.to_f32_vector(), normed = r.normed.to_f32_vector(),
                             we = r.weights.to_f32_vector(), ex = r.experts.to_f32_vector();
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(H), n(H), logit(E);
      double ss = 0;
      for (int64_t c = 0; c < H; ++c) {
        s[c] = xv[t * H + c] + (with_delta ? dv[t * H + c] : 0.0f);
        ss += s[c] * s[c];
      }
      const double inv = 1.0 / std::sqrt(ss / H + eps);
      for (int64_t c = 0; c < H; ++c) {
        n[c] = s[c] * inv * wv[c];
        EXPECT_NEAR(sum[t * H + c], s[c], 1e-5) << t << " " << c;
        EXPECT_NEAR(normed[t * H + c], n[c], 1e-4) << t << " " << c;
      }
      double m = -1e300;
      for (int64_t e = 0; e < E; ++e) {
        logit[e] = 0;
        for (int64_t c = 0; c < H; ++c) logit[e] += n[c] * rv[e * H + c];
        m = std::max(m, logit[e]);
      }
      std::vector<int64_t> order(E);
      for (int64_t e = 0; e < E; ++e) order[e] = e;
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logit[a] > logit[b]; });
      double picked = 0;
      for (int64_t j = 0; j < k; ++j) picked += std::exp(logit[order[j]] - m);
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(ex[t * k + j], static_cast<float>(order[j])) << "token " << t << " slot " << j;
        EXPECT_NEAR(we[t * k + j], std::exp(logit[order[j]] - m) / picked, 1e-5) << "token " << t << " slot " << j;
      }
    }
  }
}

}  // namespace
}  // namespace tern
