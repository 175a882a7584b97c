// Host sampler benchmark (not part of the build): Sampler::sample on one vocab row of Qwen3's size
// (151,936 logits) under the sampling settings users run, in thread CPU time per token.
// Build (from the repository root, after a build in BUILD):
//   g++ -O2 -std=c++20 -I. bench/sampler_bench.cpp BUILD/libtern_sample.a BUILD/libtern_core.a \
//       BUILD/libtern_base.a -lfmt -o sampler_bench
// Rows (random, fixed seed): "peaked", a body N(0, 2.5) under a few tokens 8-14 logits above it (the
// nucleus is a handful of tokens, as in most real steps); "flat", a body N(0, 3) under 50 tokens 12
// above it at the logits' own scale (wide rows, where every full-row pass shows); "random", N(0, 0.5)
// alone, as a random-weight checkpoint's rows (top-p's nucleus is most of the vocabulary).
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tern/sample/sampler.h"

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum Kind { kPeaked, kFlat, kRandom };

std::vector<float> make_row(Kind kind) {
  constexpr int kVocab = 151936;
  std::mt19937 gen(1);
  const bool peaked = kind == kPeaked;
  std::normal_distribution<float> body(0.0f, peaked ? 2.5f : kind == kFlat ? 3.0f : 0.5f);
  std::vector<float> row(kVocab);
  for (float& x : row) x = body(gen);
  if (kind == kRandom) return row;
  std::uniform_int_distribution<int> id(0, kVocab - 1);
  if (peaked) {
    for (float lift : {14.0f, 13.0f, 12.0f, 10.0f, 8.0f}) row[id(gen)] += lift;
  } else {
    for (int i = 0; i < 50; ++i) row[id(gen)] += 12.0f;
  }
  return row;
}

}  // namespace

int main() {
  using tern::SamplingParams;
  struct Setting {
    std::string name;
    SamplingParams p;
  };
  std::vector<Setting> settings;
  auto add = [&](std::string name, float t, int32_t k, float top_p, float min_p, int32_t top_logprobs) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.top_logprobs = top_logprobs;
    settings.push_back({std::move(name), p});
  };
  add("greedy", 0.0f, 0, 1.0f, 0.0f, 0);
  add("temperature 1.0", 1.0f, 0, 1.0f, 0.0f, 0);
  add("temperature 0.7, top-p 0.9", 0.7f, 0, 0.9f, 0.0f, 0);
  add("temperature 0.6, top-k 20, top-p 0.95", 0.6f, 20, 0.95f, 0.0f, 0);
  add("temperature 0.8, min-p 0.05", 0.8f, 0, 1.0f, 0.05f, 0);
  add("temperature 0.7, top-p 0.9, 5 top logprobs", 0.7f, 0, 0.9f, 0.0f, 5);
  std::vector<int32_t> history(300);
  std::mt19937 gen(2);
  for (int32_t& h : history) h = static_cast<int32_t>(gen() % 151936);
  std::printf("| setting | peaked row, us per token | flat row | random row |\n|---|---|---|---|\n");
  const std::vector<float> rows[3] = {make_row(kPeaked), make_row(kFlat), make_row(kRandom)};
  for (const Setting& s : settings) {
    double us[3];
    for (int r = 0; r < 3; ++r) {
      tern::Sampler sampler(s.p);
      int64_t sink = 0;
      for (int i = 0; i < 3; ++i) sink += sampler.sample(rows[r].data(), static_cast<int64_t>(rows[r].size()), history).token;
      int n = 0;
      const double t0 = now_s();
      double t = t0;
      while (t - t0 < 0.5 || n < 5) {
        sink += sampler.sample(rows[r].data(), static_cast<int64_t>(rows[r].size()), history).token;
        ++n;
        t = now_s();
      }
      us[r] = (t - t0) * 1e6 / n + static_cast<double>(sink & 0);
    }
    std::printf("| %s | %.0f | %.0f | %.0f |\n", s.name.c_str(), us[0], us[1], us[2]);
  }
  return 0;
}
