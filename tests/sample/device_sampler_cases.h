// Shared by the DeviceSampler tests (CPU here, CUDA in tests/backend): the parameter sets, logits
// rows (flat and peaked), histories, and the comparison against Sampler on the same row.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tern/sample/device_sampler.h"
#include "tern/sample/sampler.h"

namespace tern::testing {

struct DeviceSamplerCase {
  std::string name;
  SamplingParams params;
  // The device path copies the row for at most 1 % of the rows where most mass sits in a few ids ...
  bool fast_on_peaked;
  bool fast_always;  // ... and never on any row (all but a top-k wider than kMaxCandidates)
};

inline std::vector<DeviceSamplerCase> device_sampler_cases(int64_t vocab) {
  std::vector<DeviceSamplerCase> cases;
  auto add = [&](std::string name, auto edit, bool fast_on_peaked, bool fast_always) {
    SamplingParams p;
    edit(p);
    cases.push_back({std::move(name), p, fast_on_peaked || fast_always, fast_always});
  };
  const auto last = static_cast<int32_t>(vocab - 1);
  add("greedy", [](SamplingParams& p) { p.temperature = 0.0f; }, true, true);
  add("temperature", [](SamplingParams& p) { p.temperature = 0.8f; }, true, true);
  add("temperature_penalties_bias",
      [&](SamplingParams& p) {
        p.temperature = 1.3f, p.repetition_penalty = 1.2f, p.presence_penalty = 0.5f;
        p.logit_bias = {{3, 6.0f}, {last, -INFINITY}};
      },
      true, true);
  add("top_k", [](SamplingParams& p) { p.top_k = 40; }, true, true);
  add("top_k_temperature", [](SamplingParams& p) { p.top_k = 1000, p.temperature = 1.7f; }, true, true);
  add("top_p_0.9", [](SamplingParams& p) { p.top_p = 0.9f; }, true, true);
  add("top_p_0.5", [](SamplingParams& p) { p.top_p = 0.5f, p.temperature = 0.7f; }, true, true);
  add("top_p_0.999", [](SamplingParams& p) { p.top_p = 0.999f, p.temperature = 1.5f; }, true, true);
  add("min_p", [](SamplingParams& p) { p.min_p = 0.05f; }, true, true);
  add("top_p_min_p", [](SamplingParams& p) { p.top_p = 0.95f, p.min_p = 0.2f; }, true, true);
  add("top_k_top_p_min_p", [](SamplingParams& p) { p.top_k = 50, p.top_p = 0.8f, p.min_p = 0.02f; }, true, true);
  add("wide_top_k_min_p", [](SamplingParams& p) { p.top_k = 5000, p.min_p = 0.1f; }, true, false);
  // top-p after a top-k wider than the candidates: the host's total is unknown, so the row is copied.
  add("wide_top_k_top_p", [](SamplingParams& p) { p.top_k = 2000, p.top_p = 0.9f; }, false, false);
  add("penalties",
      [](SamplingParams& p) {
        p.repetition_penalty = 1.3f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.25f, p.top_k = 20;
      },
      true, true);
  add("penalties_top_p",
      [](SamplingParams& p) { p.repetition_penalty = 0.8f, p.frequency_penalty = -0.5f, p.top_p = 0.9f; }, true,
      true);
  add("greedy_penalties_bias",
      [&](SamplingParams& p) {
        p.temperature = 0.0f, p.repetition_penalty = 1.5f, p.presence_penalty = 1.0f;
        p.logit_bias = {{0, 3.0f}, {last, -INFINITY}, {7, -2.0f}};
      },
      true, true);
  add("logit_bias_bans",
      [&](SamplingParams& p) {
        p.top_p = 0.95f;
        p.logit_bias = {{1, 4.0f}, {2, -INFINITY}, {last, -INFINITY}, {last / 2, 2.5f}};
      },
      true, true);
  add("top_logprobs",
      [](SamplingParams& p) {
        p.top_k = 10, p.top_logprobs = 5;
      },
      true, true);
  add("greedy_top_logprobs", [](SamplingParams& p) { p.temperature = 0.0f, p.top_logprobs = 5; }, true, true);
  return cases;
}

// N(0, 2) logits; peaked: plus a few ids raised by ~20 (nearly all the mass), and some -inf ids.
inline std::vector<float> device_sampler_row(int64_t vocab, uint32_t seed, bool peaked) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = dist(gen);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  if (peaked) {
    for (int i = 0; i < 6; ++i) l[id(gen)] += 20.0f + dist(gen);
  }
  for (int i = 0; i < 3; ++i) l[id(gen)] = -INFINITY;
  return l;
}

inline std::vector<int32_t> device_sampler_history(int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::uniform_int_distribution<int32_t> hot(0, 20);
  std::vector<int32_t> h;
  for (int i = 0; i < 60; ++i) h.push_back(i % 3 == 0 ? hot(gen) : id(gen));  // repeats for the counts
  return h;
}

inline void expect_same_result(const Sampler::Result& want, const Sampler::Result& got, const std::string& where) {
  EXPECT_EQ(want.token, got.token) << where;
  if (std::isinf(want.logprob)) {
    EXPECT_EQ(want.logprob, got.logprob) << where;
  } else {
    EXPECT_NEAR(want.logprob, got.logprob, 1e-5) << where;
  }
  ASSERT_EQ(want.top_logprobs.size(), got.top_logprobs.size()) << where;
  for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
    EXPECT_EQ(want.top_logprobs[i].first, got.top_logprobs[i].first) << where << " top " << i;
    if (std::isinf(want.top_logprobs[i].second)) {
      EXPECT_EQ(want.top_logprobs[i].second, got.top_logprobs[i].second) << where << " top " << i;
    } else {
      EXPECT_NEAR(want.top_logprobs[i].second, got.top_logprobs[i].second, 1e-5) << where << " top " << i;
    }
  }
}

// Runs every case for n_seeds seeds, two steps each (so the Rng must stay in step across calls), on
// rows placed on dev, against Sampler on the host copy; checks the fast-path promises. Returns the
// number of full-row copies over the cases that may fall back.
inline int64_t run_device_sampler_cases(int64_t vocab, int n_seeds, Device dev, bool device_path_on_cpu) {
  int64_t fallbacks = 0;
  for (const DeviceSamplerCase& c : device_sampler_cases(vocab)) {
    for (bool peaked : {false, true}) {
      int64_t copies = 0, calls = 0;
      for (int seed = 0; seed < n_seeds; ++seed) {
        SamplingParams p = c.params;
        p.seed = 1000u + static_cast<uint64_t>(seed);
        Sampler host(p);
        DeviceSampler device(p, device_path_on_cpu);
        for (int step = 0; step < 2; ++step) {
          const uint32_t row_seed = static_cast<uint32_t>(seed * 7 + step + (peaked ? 100000 : 0));
          std::vector<float> row = device_sampler_row(vocab, row_seed, peaked);
          std::vector<int32_t> history = device_sampler_history(vocab, row_seed);
          Tensor t = Tensor::from_vector(row, {1, vocab});
          Sampler::Result want = host.sample(t, history);
          Sampler::Result got = device.sample(t.to(dev), history);
          const std::string where = c.name + (peaked ? " peaked" : " flat") + " seed " + std::to_string(seed) +
                                    " step " + std::to_string(step) + " vocab " + std::to_string(vocab);
          expect_same_result(want, got, where);
          EXPECT_EQ(host.rng().position(), device.rng().position()) << where;
        }
        copies += device.full_row_copies();
        calls += device.device_calls();
      }
      EXPECT_EQ(calls, 2 * n_seeds) << c.name;
      if (c.fast_always) {
        EXPECT_EQ(copies, 0) << c.name << (peaked ? " peaked" : " flat") << " must stay on the device path";
      } else if (peaked && c.fast_on_peaked) {
        EXPECT_LE(copies, calls / 100) << c.name << " peaked must stay on the device path";
      }
      fallbacks += copies;
    }
  }
  return fallbacks;
}

}  // namespace tern::testing
