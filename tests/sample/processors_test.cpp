// Processors against hand-computed values; warpers' kept sets (top-k, top-p boundary, min-p).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "tern/base/draw_weight.h"
#include "tern/base/error.h"
#include "tern/base/fast_exp.h"
#include "tern/ops/reduce.h"
#include "tern/sample/processors.h"

namespace tern {
namespace {

std::set<int32_t> ids_of(const std::vector<Candidate>& cands) {
  std::set<int32_t> s;
  for (const Candidate& c : cands) s.insert(c.id);
  return s;
}

// log of each probability: softmax of the result gives back exactly these probabilities.
std::vector<float> logits_from_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// The message a call throws, or "" when it returns.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Processors, LogitBiasAdds) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  apply_logit_bias(l, {{0, 0.5f}, {2, -INFINITY}});
  EXPECT_EQ(l, (std::vector<float>{1.5f, 2.0f, -INFINITY}));
  EXPECT_THROW(apply_logit_bias(l, {{3, 1.0f}}), Error);
}

TEST(Processors, RepetitionPenaltyHfSemantics) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f};
  std::vector<int32_t> history = {0, 1, 1, 3, 3, 3, 5};
  apply_repetition_penalty(l, history, 2.0f);
  // positive logits divide, non-positive multiply, each distinct id once however often it repeats
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 0.5f, 1.5f, -2.0f, 0.0f}));
  std::vector<float> m = {2.0f, -1.0f};
  apply_repetition_penalty(m, std::vector<int32_t>{0, 1}, 0.5f);  // < 1 encourages repeats
  EXPECT_EQ(m, (std::vector<float>{4.0f, -0.5f}));
  EXPECT_THROW(apply_repetition_penalty(m, std::vector<int32_t>{2}, 2.0f), Error);
  EXPECT_THROW(apply_repetition_penalty(m, std::vector<int32_t>{-1}, 2.0f), Error);
}

TEST(Processors, PresenceFrequencyOpenAiSemantics) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  std::vector<int32_t> history = {3, 0, 1, 3, 1, 3};
  apply_presence_frequency_penalty(l, history, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(l[0], 2.0f - 0.5f - 0.25f * 1);
  EXPECT_FLOAT_EQ(l[1], -1.0f - 0.5f - 0.25f * 2);
  EXPECT_FLOAT_EQ(l[2], 0.5f);
  EXPECT_FLOAT_EQ(l[3], 3.0f - 0.5f - 0.25f * 3);
  EXPECT_FLOAT_EQ(l[4], -2.0f);
  std::vector<float> m = {1.0f};
  apply_presence_frequency_penalty(m, std::vector<int32_t>{0, 0}, -1.0f, 0.0f);  // negative encourages
  EXPECT_FLOAT_EQ(m[0], 2.0f);
  EXPECT_THROW(apply_presence_frequency_penalty(m, std::vector<int32_t>{1}, 1.0f, 0.0f), Error);
}

TEST(Processors, TemperatureDivides) {
  std::vector<float> l = {1.0f, -3.0f, -INFINITY};
  apply_temperature(l, 0.5f);
  EXPECT_EQ(l, (std::vector<float>{2.0f, -6.0f, -INFINITY}));
  EXPECT_THROW(apply_temperature(l, 0.0f), Error);
}

TEST(Processors, MakeCandidatesDropsMinusInfAndRejectsBadRows) {
  std::vector<float> l = {1.0f, -INFINITY, 2.0f};
  auto c = make_candidates(l);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].id, 0);
  EXPECT_EQ(c[1].id, 2);
  std::vector<float> nan_row = {1.0f, NAN};
  EXPECT_THROW(make_candidates(nan_row), Error);
  std::vector<float> inf_row = {1.0f, INFINITY};
  EXPECT_THROW(make_candidates(inf_row), Error);
  std::vector<float> dead = {-INFINITY, -INFINITY};
  EXPECT_THROW(make_candidates(dead), Error);
}

TEST(Processors, TopKKeepsExactlyKBestTiesTowardLowerId) {
  std::vector<float> l = {0.1f, 5.0f, 3.0f, 5.0f, 3.0f, -1.0f, 3.0f};
  auto c = make_candidates(l);
  top_k_filter(c, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].id, 1);  // sorted best first
  EXPECT_EQ(c[1].id, 3);
  EXPECT_EQ(c[2].id, 2);  // of the tied 3.0s, the lowest id
  auto all = make_candidates(l);
  top_k_filter(all, 100);
  EXPECT_EQ(all.size(), l.size());
  auto off = make_candidates(l);
  top_k_filter(off, 0);
  EXPECT_EQ(off.size(), l.size());
}

TEST(Processors, TopKOnLargeRandomRowMatchesFullSort) {
  std::mt19937 gen(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> l(150000);
  for (float& x : l) x = dist(gen);
  auto c = make_candidates(l);
  top_k_filter(c, 50);
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  ASSERT_EQ(c.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(c[i].id, order[i]);
}

// top_k_candidates against make_candidates + top_k_filter: rows of few distinct values (many ties),
// -inf holes, and k from 1 past the row's length; the list must match element for element.
TEST(Processors, TopKCandidatesMatchesMakeThenFilter) {
  std::mt19937 gen(11);
  for (size_t n : {1u, 7u, 16u, 17u, 100u, 5000u}) {
    for (int levels : {3, 1000}) {
      std::uniform_int_distribution<int> level(0, levels - 1);
      std::bernoulli_distribution hole(0.2);
      std::vector<float> l(n);
      for (float& x : l) x = hole(gen) ? -INFINITY : 0.25f * static_cast<float>(level(gen)) - 2.0f;
      l[n / 2] = 1.5f;  // at least one finite logit
      const int32_t len = static_cast<int32_t>(n);
      for (int32_t k : {1, 2, 5, 16, 20, len - 1, len, len + 5}) {
        if (k < 1) continue;
        std::vector<Candidate> want = make_candidates(l);
        top_k_filter(want, k);
        std::vector<Candidate> got = top_k_candidates(l, k);
        ASSERT_EQ(got.size(), want.size()) << "n " << n << " levels " << levels << " k " << k;
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_EQ(got[i].id, want[i].id) << "n " << n << " k " << k << " at " << i;
          EXPECT_EQ(got[i].logit, want[i].logit);
        }
      }
    }
  }
}

// The same errors as make_candidates, also where a bad logit sits in a block the heap could skip.
TEST(Processors, TopKCandidatesRejectsWhatMakeCandidatesRejects) {
  std::vector<float> l(100, 0.0f);
  l[3] = 5.0f;
  for (float bad : {NAN, INFINITY}) {
    for (size_t at : {0u, 1u, 40u, 99u}) {
      std::vector<float> row = l;
      row[at] = bad;
      const std::string want = error_of([&] { make_candidates(row); });
      EXPECT_FALSE(want.empty());
      EXPECT_EQ(error_of([&] { top_k_candidates(row, 2); }), want) << "bad logit at " << at;
    }
  }
  std::vector<float> dead(40, -INFINITY);
  EXPECT_THROW(top_k_candidates(dead, 3), Error);
  EXPECT_THROW(top_k_candidates(l, 0), Error);
}

// draw_row against make_candidates + draw_candidate: the same id for every u tried, on rows with -inf
// holes (first and last ids too), weights that underflow to 0, and one huge logit; the same errors.
TEST(Processors, DrawRowMatchesCandidatesThenDraw) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (size_t n : {1u, 2u, 9u, 1023u, 1025u, 4000u}) {
    for (float spread : {0.5f, 8.0f, 60.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::bernoulli_distribution hole(0.3);
      std::vector<float> l(n);
      for (float& x : l) x = hole(gen) ? -INFINITY : dist(gen);
      l[n / 2] = 0.0f;
      if (n > 2) l.front() = l.back() = -INFINITY;
      std::vector<float> us = {0.0f, std::nextafter(1.0f, 0.0f), 0.5f};
      for (int i = 0; i < 300; ++i) {
        float u = uni(gen);
        us.push_back(u < 1.0f ? u : 0.0f);
      }
      const Tensor row = Tensor::from_vector(l, {static_cast<int64_t>(n)});
      const float m = *std::max_element(l.begin(), l.end());
      for (float u : us) {
        std::vector<Candidate> c = make_candidates(l);
        const int32_t id = draw_row(l, u);
        EXPECT_EQ(id, draw_candidate(c, u)) << "n " << n << " spread " << spread << " u " << u;
        EXPECT_EQ(id, ops::draw_index(row, m, u).item<int32_t>()) << "n " << n << " spread " << spread << " u " << u;
      }
    }
  }
  std::vector<float> nan_row = {1.0f, NAN}, inf_row = {1.0f, INFINITY}, dead = {-INFINITY, -INFINITY};
  for (const auto& row : {nan_row, inf_row, dead}) {
    const std::string want = error_of([&] { make_candidates(row); });
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(error_of([&] { draw_row(row, 0.5f); }), want);
  }
  std::vector<float> ok = {1.0f, 2.0f};
  EXPECT_THROW(draw_row(ok, 1.0f), Error);
}

// top_p_candidates against make_candidates + top_p_filter: the same kept set on peaked rows (a small
// nucleus), flat ones (the nucleus reaching the catch-all bin), rows with -inf holes and many ties.
TEST(Processors, TopPCandidatesMatchesMakeThenFilter) {
  std::mt19937 gen(8);
  int fast = 0;
  for (size_t n : {1u, 3u, 40u, 5000u, 151936u}) {
    for (float spread : {0.02f, 1.0f, 3.0f, 30.0f}) {
      for (bool peaked : {false, true}) {
        std::normal_distribution<float> dist(0.0f, spread);
        std::bernoulli_distribution hole(0.1);
        std::vector<float> l(n);
        for (float& x : l) x = hole(gen) ? -INFINITY : std::round(dist(gen) * 64.0f) / 64.0f;  // ties
        l[n / 3] = peaked ? 12.0f : 0.0f;
        for (float top_p : {0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}) {
          std::vector<Candidate> want = make_candidates(l);
          top_p_filter(want, top_p);
          std::vector<Candidate> got = top_p_candidates(l, top_p);
          EXPECT_EQ(ids_of(got), ids_of(want)) << "n " << n << " spread " << spread << " top_p " << top_p;
          EXPECT_EQ(got.size(), want.size());
          fast += got.size() < 64;
        }
      }
    }
  }
  EXPECT_GT(fast, 20);  // small nuclei came up (where the row path builds few candidates)
  for (std::vector<float> bad : {std::vector<float>{1.0f, NAN}, std::vector<float>{INFINITY, 1.0f},
                                 std::vector<float>{-INFINITY}}) {
    const std::string want = error_of([&] { make_candidates(bad); });
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(error_of([&] { top_p_candidates(bad, 0.9f); }), want);
  }
}

// min_p_candidates against make_candidates + min_p_filter: the same list in the same (id) order, and
// the same errors.
TEST(Processors, MinPCandidatesMatchesMakeThenFilter) {
  std::mt19937 gen(13);
  for (size_t n : {1u, 17u, 5000u}) {
    for (float spread : {0.5f, 4.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::bernoulli_distribution hole(0.2);
      std::vector<float> l(n);
      for (float& x : l) x = hole(gen) ? -INFINITY : dist(gen);
      l[n / 2] = 3.0f;
      for (float min_p : {0.0f, 0.01f, 0.1f, 0.5f, 1.0f}) {
        std::vector<Candidate> want = make_candidates(l);
        min_p_filter(want, min_p);
        std::vector<Candidate> got = min_p_candidates(l, min_p);
        ASSERT_EQ(got.size(), want.size()) << "n " << n << " min_p " << min_p;
        for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].id, want[i].id);
      }
    }
  }
  std::vector<float> nan_row = {1.0f, NAN};
  EXPECT_THROW(min_p_candidates(nan_row, 0.1f), Error);
  std::vector<float> dead = {-INFINITY};
  EXPECT_THROW(min_p_candidates(dead, 0.1f), Error);
}

TEST(Processors, TopPKeepsNucleusIncludingBoundaryToken) {
  // ids scrambled so id order != probability order
  std::vector<double> probs = {0.10, 0.30, 0.05, 0.40, 0.15};  // sorted: id3 .40, id1 .30, id4 .15, id0 .10, id2 .05
  auto l = logits_from_probs(probs);
  auto kept = [&](float top_p) {
    auto c = make_candidates(l);
    top_p_filter(c, top_p);
    return ids_of(c);
  };
  EXPECT_EQ(kept(0.39f), (std::set<int32_t>{3}));
  EXPECT_EQ(kept(0.41f), (std::set<int32_t>{3, 1}));        // mass before id1 is .40 < .41: boundary token kept
  EXPECT_EQ(kept(0.69f), (std::set<int32_t>{3, 1}));        // .40 + .30 reaches .69
  EXPECT_EQ(kept(0.71f), (std::set<int32_t>{3, 1, 4}));     // id4 is the boundary token
  EXPECT_EQ(kept(0.86f), (std::set<int32_t>{3, 1, 4, 0}));
  EXPECT_EQ(kept(0.96f), (std::set<int32_t>{3, 1, 4, 0, 2}));
  EXPECT_EQ(kept(1.0f), (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(kept(1e-6f), (std::set<int32_t>{3}));  // always at least one
}

TEST(Processors, TopPLargeUnsortedRowMatchesBruteForce) {
  // A flat-ish row: the boundary histogram bin holds many tokens.
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> l(20000);
  for (float& x : l) x = dist(gen);
  for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
    auto c = make_candidates(l);
    top_p_filter(c, top_p);
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    // The rule (tern/base/draw_weight.h): integer weights, exact sums, a token kept iff the weight
    // before it is below the target.
    const float m = l[order[0]];
    uint64_t total = 0;
    for (float x : l) total += draw_weight_of(exp_f32(x - m));
    const uint64_t target = top_p_target(top_p_fraction(top_p), total);
    size_t n = 0;
    uint64_t before = 0;
    while (n < order.size() && (n == 0 || before < target)) before += draw_weight_of(exp_f32(l[order[n++]] - m));
    ASSERT_EQ(c.size(), n) << "top_p " << top_p;
    EXPECT_EQ(ids_of(c), std::set<int32_t>(order.begin(), order.begin() + n)) << "top_p " << top_p;
  }
}

TEST(Processors, TopPAfterTopKRenormalisesOverSurvivors) {
  std::vector<double> probs = {0.40, 0.30, 0.20, 0.10};
  auto c = make_candidates(logits_from_probs(probs));
  top_k_filter(c, 2);          // survivors .4/.7 = .571, .3/.7 = .429
  top_p_filter(c, 0.56f);      // .571 alone reaches .56
  EXPECT_EQ(ids_of(c), (std::set<int32_t>{0}));
  auto d = make_candidates(logits_from_probs(probs));
  top_k_filter(d, 2);
  top_p_filter(d, 0.58f);
  EXPECT_EQ(ids_of(d), (std::set<int32_t>{0, 1}));
}

TEST(Processors, MinPKeepsRelativeToMax) {
  std::vector<double> probs = {0.10, 0.50, 0.05, 0.20, 0.15};
  auto kept = [&](float min_p) {
    auto c = make_candidates(logits_from_probs(probs));
    min_p_filter(c, min_p);
    return ids_of(c);
  };
  EXPECT_EQ(kept(0.25f), (std::set<int32_t>{1, 3, 4}));  // threshold .125: .10 and .05 go
  EXPECT_EQ(kept(0.19f), (std::set<int32_t>{0, 1, 3, 4}));  // threshold .095
  EXPECT_EQ(kept(1.0f), (std::set<int32_t>{1}));  // only the max survives
  EXPECT_EQ(kept(0.0f).size(), 5u);
}

TEST(Processors, WarpChainsInOrder) {
  std::vector<double> probs = {0.05, 0.35, 0.25, 0.20, 0.15};
  SamplingParams p;
  p.top_k = 4;     // drops id0
  p.top_p = 0.9f;  // over .35,.25,.20,.15 (sum .95): masses before: 0, .368, .632, .842 -> all four
  p.min_p = 0.5f;  // relative to .35: keeps >= .175 -> ids 1, 2, 3
  EXPECT_EQ(ids_of(warp(logits_from_probs(probs), p)), (std::set<int32_t>{1, 2, 3}));
}

// The integer draw against the exact inverse CDF (long double probabilities): the same id wherever u
// is not within 1e-9 of a boundary (the integer weights are exact to 2^-40 of the best token's).
TEST(Processors, DrawRowIsTheInverseCdf) {
  std::mt19937 gen(12);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  int checked = 0;
  for (size_t n : {3u, 50u, 5000u}) {
    for (float spread : {0.3f, 3.0f, 12.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::vector<float> l(n);
      for (float& x : l) x = dist(gen);
      if (n > 3) l[1] = -INFINITY;
      const float m = *std::max_element(l.begin(), l.end());
      std::vector<long double> cdf(n);
      long double total = 0;
      for (size_t i = 0; i < n; ++i) cdf[i] = total += std::exp(static_cast<long double>(l[i]) - m);
      for (int t = 0; t < 200; ++t) {
        const float u = std::min(uni(gen), std::nextafter(1.0f, 0.0f));
        const long double at = u * total;
        const size_t want = std::upper_bound(cdf.begin(), cdf.end(), at) - cdf.begin();
        const long double lo = want ? cdf[want - 1] : 0, hi = cdf[want];
        if (at - lo < 1e-9L * total || hi - at < 1e-9L * total) continue;
        EXPECT_EQ(draw_row(l, u), static_cast<int32_t>(want)) << "n " << n << " spread " << spread << " u " << u;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1700);
  // Far below the best token (weight under 2^-40 of its), a token weighs 0 and is never drawn.
  std::vector<float> l = {-30.0f, 0.0f};
  EXPECT_EQ(draw_row(l, 0.0f), 1);
}

TEST(Processors, DrawCandidateInverseCdfInIdOrder) {
  std::vector<double> probs = {0.25, 0.5, 0.25};
  auto l = logits_from_probs(probs);
  auto draw = [&](float u) {
    auto c = make_candidates(l);
    std::reverse(c.begin(), c.end());  // any input order; the draw walks ids ascending
    return draw_candidate(c, u);
  };
  EXPECT_EQ(draw(0.0f), 0);
  EXPECT_EQ(draw(0.24f), 0);
  EXPECT_EQ(draw(0.26f), 1);
  EXPECT_EQ(draw(0.74f), 1);
  EXPECT_EQ(draw(0.76f), 2);
  EXPECT_EQ(draw(std::nextafter(1.0f, 0.0f)), 2);
  auto c = make_candidates(l);
  EXPECT_THROW(draw_candidate(c, 1.0f), Error);
}

TEST(Processors, DrawCandidateDenseAndSortedPathsAgree) {
  // > 1024 shuffled candidates take the dense id-order walk; the same set pre-sorted by id the plain one.
  std::mt19937 gen(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Candidate> base;
  for (int32_t id = 0; id < 8000; ++id) {
    if (id % 3 != 0) base.push_back({id, dist(gen)});
  }
  std::vector<Candidate> shuffled = base;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int i = 0; i < 200; ++i) {
    float u = std::min(ud(gen), std::nextafter(1.0f, 0.0f));
    auto a = base, b = shuffled;
    EXPECT_EQ(draw_candidate(a, u), draw_candidate(b, u)) << "u " << u;
  }
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Two implementations of the nucleus rule: the host warpers (histogram walk over candidates) and
// ops::top_p_mask (a sorted walk over the row), on peaked and flat rows with ties and -inf holes.
TEST(Processors, WarpKeepsWhatTheNucleusOpKeeps) {
  std::mt19937 gen(17);
  int trial = 0;
  for (int64_t n : {int64_t(2), int64_t(300), int64_t(5000), int64_t(151936)}) {
    for (float spread : {0.3f, 1.0f, 3.0f}) {
      for (bool peaked : {false, true}) {
        std::normal_distribution<float> dist(0.0f, spread);
        std::bernoulli_distribution hole(0.05);
        std::vector<float> row(static_cast<size_t>(n));
        for (float& x : row) x = hole(gen) ? -INFINITY : std::round(dist(gen) * 256.0f) / 256.0f;  // ties
        row[static_cast<size_t>(n / 2)] = peaked ? 10.0f : 1.0f;
        const float m = *std::max_element(row.begin(), row.end());
        const Tensor t = Tensor::from_vector(row, {n});
        for (float top_p : {0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}) {
          for (float min_p : {0.0f, 0.05f}) {
            if (n == 151936 && ++trial % 4 != 0) continue;  // the op sorts the row: a few of the long ones
            SamplingParams p;
            p.top_p = top_p, p.min_p = min_p;
            std::set<int32_t> want;
            for (const Candidate& c : warp(row, p)) want.insert(c.id);
            const std::vector<float> masked =
                ops::top_p_mask(t, Tensor::full({1}, m, Dtype::f32), top_p, min_p > 0.0f ? std::log(min_p) : -INFINITY)
                    .to_f32_vector();
            std::set<int32_t> got;
            for (int64_t i = 0; i < n; ++i) {
              if (masked[i] != -INFINITY) got.insert(static_cast<int32_t>(i));
            }
            EXPECT_EQ(got, want) << "n " << n << " spread " << spread << " peaked " << peaked << " top_p " << top_p
                                 << " min_p " << min_p;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
