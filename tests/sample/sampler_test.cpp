// Sampler: greedy, seeded determinism, frequencies under temperature/top-k/top-p/min-p, bias,
// penalties end to end, raw logprobs and top_logprobs, the Tensor overload.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>

#include "tern/base/error.h"
#include "tern/core/tensor.h"
#include "tern/sample/sampler.h"

namespace tern {
namespace {

std::vector<double> softmax(const std::vector<float>& l, double temperature = 1.0) {
  double m = *std::max_element(l.begin(), l.end()), s = 0.0;
  std::vector<double> p;
  for (float x : l) p.push_back(std::exp((x - m) / temperature));
  for (double x : p) s += x;
  for (double& x : p) x /= s;
  return p;
}

std::vector<float> random_logits(int64_t vocab, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> l(vocab);
  for (float& x : l) x = dist(gen);
  return l;
}

// Draws n tokens and checks every frequency against expected within 5 binomial standard deviations
// (plus a floor for tiny probabilities); a token with expected probability 0 must never appear.
void expect_frequencies(Sampler& s, const std::vector<float>& logits, const std::vector<double>& expected, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits.data(), logits.size()).token];
  for (size_t id = 0; id < logits.size(); ++id) {
    double p = expected[id];
    if (p == 0.0) {
      EXPECT_EQ(counts[id], 0) << "id " << id << " should never be drawn";
      continue;
    }
    double sd = std::sqrt(p * (1.0 - p) / n);
    EXPECT_NEAR(static_cast<double>(counts[id]) / n, p, 5.0 * sd + 1e-4) << "id " << id;
  }
}

TEST(Sampler, GreedyIsArgmaxFirstOnTiesWithoutRngDraw) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  std::vector<float> l = {1.0f, 5.0f, 3.0f, 5.0f};
  EXPECT_EQ(s.sample(l.data(), 4).token, 1);
  auto big = random_logits(150000, 1);
  int64_t argmax = std::max_element(big.begin(), big.end()) - big.begin();
  EXPECT_EQ(s.sample(big.data(), big.size()).token, argmax);
  EXPECT_EQ(s.rng().position(), 0u);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  auto l = random_logits(1000, 2, 0.5f);
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.seed = seed;
    p.top_p = 0.95f;
    Sampler s(p);
    std::vector<int32_t> toks;
    for (int i = 0; i < 100; ++i) toks.push_back(s.sample(l.data(), l.size(), toks).token);
    EXPECT_EQ(s.rng().position(), 100u);  // exactly one word per sampled token
    return toks;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

TEST(Sampler, TemperatureMatchesSoftmaxFrequencies) {
  std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
  for (float t : {1.0f, 0.7f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 99;
    Sampler s(p);
    expect_frequencies(s, l, softmax(l, t), 100000);
  }
}

TEST(Sampler, TopKOnlyReturnsKBestWithRenormalisedFrequencies) {
  auto l = random_logits(1000, 4, 1.0f);
  SamplingParams p;
  p.top_k = 5;
  p.seed = 5;
  std::vector<int32_t> order(l.size());
  for (size_t i = 0; i < l.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  std::vector<double> expected(l.size(), 0.0);
  double z = 0.0;
  for (int i = 0; i < 5; ++i) z += std::exp(l[order[i]]);
  for (int i = 0; i < 5; ++i) expected[order[i]] = std::exp(l[order[i]]) / z;
  Sampler s(p);
  expect_frequencies(s, l, expected, 50000);
}

TEST(Sampler, TopPReturnsExactlyTheNucleusRenormalised) {
  std::vector<double> probs = {0.10, 0.30, 0.05, 0.40, 0.15};  // nucleus at 0.8: ids 3, 1, 4 (mass .85)
  std::vector<float> l;
  for (double q : probs) l.push_back(static_cast<float>(std::log(q)));
  SamplingParams p;
  p.top_p = 0.8f;
  p.seed = 6;
  Sampler s(p);
  expect_frequencies(s, l, {0.0, 0.30 / 0.85, 0.0, 0.40 / 0.85, 0.15 / 0.85}, 100000);
}

TEST(Sampler, MinPKeptSet) {
  std::vector<double> probs = {0.10, 0.50, 0.05, 0.20, 0.15};  // min_p .25 -> keep .50 .20 .15
  std::vector<float> l;
  for (double q : probs) l.push_back(static_cast<float>(std::log(q)));
  SamplingParams p;
  p.min_p = 0.25f;
  p.seed = 7;
  Sampler s(p);
  expect_frequencies(s, l, {0.0, 0.50 / 0.85, 0.0, 0.20 / 0.85, 0.15 / 0.85}, 100000);
}

TEST(Sampler, LogitBiasForcesAndBans) {
  auto l = random_logits(5000, 8);
  for (float t : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.logit_bias[4321] = 100.0f;
    Sampler s(p);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l.data(), l.size()).token, 4321);
  }
  std::vector<float> two = {0.0f, 0.0f};
  SamplingParams ban;
  ban.logit_bias[0] = -INFINITY;
  Sampler s(ban);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(two.data(), 2).token, 1);
}

TEST(Sampler, PenaltiesApplyInGreedy) {
  std::vector<float> l = {3.0f, 2.5f, 1.0f};
  std::vector<int32_t> history = {0};
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;  // id0: 3 / 1.5 = 2 < 2.5
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, history).token, 1);
  SamplingParams q;
  q.temperature = 0.0f;
  q.frequency_penalty = 0.4f;  // id0: 3 - 0.4 * 2 = 2.2 < 2.5
  std::vector<int32_t> twice = {0, 0};
  EXPECT_EQ(Sampler(q).sample(l.data(), 3, twice).token, 1);
  EXPECT_EQ(Sampler(q).sample(l.data(), 3, history).token, 0);  // 2.6 still wins
  std::vector<int32_t> bad = {3};
  EXPECT_THROW(Sampler(q).sample(l.data(), 3, bad), Error);
}

TEST(Sampler, LogprobsComeFromRawLogits) {
  auto l = random_logits(300, 9);
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 3;
  p.repetition_penalty = 1.3f;
  p.top_logprobs = 300;
  Sampler s(p);
  std::vector<int32_t> history = {1, 2, 3};
  auto r = s.sample(l.data(), l.size(), history);
  auto raw = softmax(l);
  EXPECT_NEAR(r.logprob, std::log(raw[r.token]), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 300u);
  double total = 0.0;
  for (const auto& [id, lp] : r.top_logprobs) {
    total += std::exp(lp);
    EXPECT_NEAR(lp, std::log(raw[id]), 1e-5);
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
  for (size_t i = 1; i < r.top_logprobs.size(); ++i) EXPECT_GE(r.top_logprobs[i - 1].second, r.top_logprobs[i].second);
}

// raw_logprob against log_softmax in f64 with std::exp: rows of every length up to past two vector
// widths (the tails), a vocab-sized row, -inf entries, and terms from e^0 down past f32's range.
TEST(Sampler, RawLogprobsMatchAnF64Reference) {
  std::mt19937 gen(21);
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 19; ++n) sizes.push_back(n);
  sizes.push_back(1023);
  sizes.push_back(1025);
  sizes.push_back(151936);
  for (size_t n : sizes) {
    for (float spread : {1.0f, 40.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::bernoulli_distribution hole(0.1);
      std::vector<float> l(n);
      for (float& x : l) x = hole(gen) ? -INFINITY : dist(gen);
      l[gen() % n] = 5.0f * spread;  // one finite maximum at least
      double m = -INFINITY;
      for (float x : l) m = std::max(m, static_cast<double>(x));
      double sum = 0.0;
      for (float x : l) sum += std::exp(static_cast<double>(x) - m);
      for (int32_t t : {0, static_cast<int32_t>(n / 2), static_cast<int32_t>(n - 1)}) {
        const float got = raw_logprob(l, t);
        if (l[t] == -INFINITY) {
          EXPECT_EQ(got, -INFINITY);
          continue;
        }
        const double want = static_cast<double>(l[t]) - m - std::log(sum);
        EXPECT_NEAR(got, want, 1e-6 + 3e-7 * std::abs(want)) << "n " << n << " spread " << spread << " token " << t;
      }
    }
  }
  // NaN and +inf rows still give NaN, as they always did (the samplers reject such rows first).
  std::vector<float> nan_row(40, 0.0f), inf_row(40, 0.0f);
  nan_row[30] = NAN;
  inf_row[30] = INFINITY;
  EXPECT_TRUE(std::isnan(raw_logprob(nan_row, 1)));
  EXPECT_TRUE(std::isnan(raw_logprob(inf_row, 1)));
}

// raw_top_logprobs' ids against a full sort (logit descending, ties toward lower id) on rows with many
// ties, -inf and +inf entries, for k up to past the row's length; a NaN anywhere is named.
TEST(Sampler, RawTopLogprobsMatchAFullSort) {
  std::mt19937 gen(17);
  for (size_t n : {1u, 15u, 16u, 17u, 300u, 20000u}) {
    std::uniform_int_distribution<int> level(0, 40);
    std::vector<float> l(n);
    for (float& x : l) {
      const int v = level(gen);
      x = v == 0 ? -INFINITY : (v == 40 && n > 200 ? INFINITY : 0.5f * static_cast<float>(v));
    }
    std::vector<int32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    for (int32_t k : {1, 3, 16, 100, static_cast<int32_t>(n), static_cast<int32_t>(n) + 7}) {
      auto top = raw_top_logprobs(l, k);
      ASSERT_EQ(top.size(), std::min<size_t>(static_cast<size_t>(k), n));
      for (size_t i = 0; i < top.size(); ++i) {
        EXPECT_EQ(top[i].first, order[i]) << "n " << n << " k " << k << " at " << i;
      }
    }
  }
  std::vector<float> nan_row(50, 1.0f);
  nan_row[33] = NAN;
  try {
    raw_top_logprobs(nan_row, 3);
    ADD_FAILURE() << "a NaN row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at id 33"), std::string::npos) << e.what();
  }
}

TEST(Sampler, TopLogprobsDescendingTiesTowardLowerId) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f, -INFINITY};
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_logprobs = 4;
  auto r = Sampler(p).sample(l.data(), 5);
  ASSERT_EQ(r.top_logprobs.size(), 4u);
  EXPECT_EQ(r.top_logprobs[0].first, 1);
  EXPECT_EQ(r.top_logprobs[1].first, 3);
  EXPECT_EQ(r.top_logprobs[2].first, 2);
  EXPECT_EQ(r.top_logprobs[3].first, 0);
  EXPECT_EQ(r.top_logprobs[0].second, r.top_logprobs[1].second);
  EXPECT_EQ(r.token, 1);
  EXPECT_EQ(r.logprob, r.top_logprobs[0].second);
  p.top_logprobs = 20;  // clamped to the vocab, the -inf token last
  auto all = Sampler(p).sample(l.data(), 5);
  ASSERT_EQ(all.top_logprobs.size(), 5u);
  EXPECT_EQ(all.top_logprobs[4].first, 4);
  EXPECT_EQ(all.top_logprobs[4].second, -INFINITY);
}

TEST(Sampler, RejectsBadRows) {
  Sampler s(SamplingParams{});
  std::vector<float> nan_row = {0.0f, NAN};
  EXPECT_THROW(s.sample(nan_row.data(), 2), Error);
  std::vector<float> dead = {-INFINITY, -INFINITY};
  EXPECT_THROW(s.sample(dead.data(), 2), Error);
  EXPECT_THROW(s.sample(nullptr, 2), Error);
  std::vector<float> ok = {0.0f};
  EXPECT_THROW(s.sample(ok.data(), 0), Error);
}

// A rejected row consumes no random word on any sampling path (temperature alone, top-k, top-p,
// min-p), so a caller that skips it keeps the stream it would have had.
TEST(Sampler, RejectedRowsConsumeNoRandomWord) {
  auto with = [](float t, int32_t k, float top_p, float min_p) {
    SamplingParams p;
    p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p;
    return p;
  };
  for (const SamplingParams& p : {with(1.0f, 0, 1.0f, 0.0f), with(0.7f, 5, 1.0f, 0.0f), with(0.7f, 0, 0.9f, 0.0f),
                                  with(0.7f, 0, 1.0f, 0.1f)}) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> row(100, bad == -INFINITY ? -INFINITY : 0.5f);
      row[60] = bad;
      Sampler s(p);
      EXPECT_THROW(s.sample(row.data(), 100), Error) << bad << " top_k " << p.top_k << " top_p " << p.top_p;
      EXPECT_EQ(s.rng().position(), 0u) << bad << " top_k " << p.top_k << " top_p " << p.top_p;
    }
  }
}

TEST(Sampler, TensorOverloadMatchesPointer) {
  auto l = random_logits(64, 10);
  SamplingParams p;
  p.seed = 3;
  Sampler a(p), b(p), c(p);
  Tensor t = Tensor::from_vector(l, {64});
  Tensor row = Tensor::from_vector(l, {1, 64});
  for (int i = 0; i < 20; ++i) {
    int32_t expect = a.sample(l.data(), 64).token;
    EXPECT_EQ(b.sample(t).token, expect);
    EXPECT_EQ(c.sample(row).token, expect);
  }
  std::vector<float> doubled(128);
  for (int i = 0; i < 64; ++i) doubled[2 * i] = l[i];
  Tensor strided = Tensor::from_vector(doubled, {128}).slice(0, 0, 128, 2);
  EXPECT_EQ(Sampler(p).sample(strided).token, Sampler(p).sample(l.data(), 64).token);
  EXPECT_THROW(a.sample(Tensor::from_vector(l, {2, 32})), Error);
  EXPECT_THROW(a.sample(Tensor::from_vector(std::vector<int32_t>(4, 0), {4})), Error);
}

TEST(Sampler, LargeVocabTopKStaysInSet) {
  auto l = random_logits(150000, 12);
  SamplingParams p;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.temperature = 0.8f;
  p.seed = 1;
  Sampler s(p);
  std::vector<float> sorted = l;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
  float kth = sorted[39];
  for (int i = 0; i < 200; ++i) EXPECT_GE(l[s.sample(l.data(), l.size()).token], kth);
}

}  // namespace
}  // namespace tern
