// Sampler: processors, greedy or seeded inverse-CDF draw, and raw-logit logprobs.
#include "tern/sample/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "tern/base/error.h"

namespace tern {

namespace {

// e^x for x <= 0 (or -inf), in f32 arithmetic the compiler vectorises: x = n ln2 + r with |r| <= ln2 / 2,
// e^r by its Taylor series to r^7 (relative error below 1e-8, then the f32 rounding of 8 fused steps:
// within about 2 ulp of the correctly rounded value), times 2^n; results below 2^-126 (x < -87.3)
// flush to 0, which moves no sum that also holds e^0 = 1 by more than 1e-38 of it.
inline float exp_nonpositive(float x) {
  x = std::max(x, -104.0f);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest (|x log2 e| < 2^22)
  float r = std::fma(n, -0.693145751953125f, x);                  // ln 2, split so n * hi is exact
  r = std::fma(n, -1.428606765330187e-06f, r);
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  // 2^n from its exponent bits; n <= -127 gives the bits of +0 (no branch, so the loop vectorises)
  const int32_t e = std::max(static_cast<int32_t>(n), -127);
  return p * std::bit_cast<float>((e + 127) << 23);
}

// max and log(sum exp(l - max)) of a row: f32 exp terms (exp_nonpositive) over an f64 sum kept in 8
// interleaved partial sums, added in a fixed order (the same row gives the same result every time);
// max is -inf for an all -inf row. A row with NaN or +inf takes the plain loop with std::exp (NaN or
// +inf out, as before).
constexpr size_t kLanes = 8;  // the vector loops' width (8 f32 lanes of AVX2)

// A row's max, and whether every logit is below +inf (no NaN, no +inf: then the max is exact whatever
// order the lanes took), in one vectorised pass.
struct RowScan {
  float max;
  bool clean;
};
RowScan scan_row(std::span<const float> logits) {
  const size_t n = logits.size(), whole = n / kLanes * kLanes;
  float lane_max[kLanes], lane_ok[kLanes];  // lane_ok: 1 while every logit seen was < +inf
  for (size_t j = 0; j < kLanes; ++j) lane_max[j] = -INFINITY, lane_ok[j] = 1.0f;
  for (size_t i = 0; i < whole; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float l = logits[i + j];
      lane_max[j] = std::max(lane_max[j], l);
      lane_ok[j] = std::min(lane_ok[j], l < INFINITY ? 1.0f : 0.0f);  // 0 for NaN and +inf
    }
  }
  RowScan r{-INFINITY, true};
  for (size_t j = 0; j < kLanes; ++j) r.max = std::max(r.max, lane_max[j]), r.clean = r.clean && lane_ok[j] == 1.0f;
  for (size_t i = whole; i < n; ++i) r.max = std::max(r.max, logits[i]), r.clean = r.clean && logits[i] < INFINITY;
  return r;
}

std::pair<double, double> log_sum_exp(std::span<const float> logits) {
  const size_t n = logits.size(), whole = n / kLanes * kLanes;
  const RowScan scan = scan_row(logits);
  float m = scan.max;
  if (!scan.clean) {
    m = -INFINITY;
    for (float l : logits) m = std::max(m, l);
    if (m == -INFINITY) return {m, 0.0};
    double s = 0.0;
    for (float l : logits) s += std::exp(l - m);
    return {m, std::log(s)};
  }
  if (m == -INFINITY) return {m, 0.0};
  double part[kLanes] = {};
  constexpr size_t kChunk = 1024;  // exp terms of a chunk, then their sums
  float terms[kChunk];
  for (size_t c = 0; c < whole; c += kChunk) {
    const size_t len = std::min(kChunk, whole - c);
    for (size_t i = 0; i < len; ++i) terms[i] = exp_nonpositive(logits[c + i] - m);
    for (size_t i = 0; i < len; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) part[j] += terms[i + j];
    }
  }
  double s = 0.0;
  for (size_t j = 0; j < kLanes; ++j) s += part[j];
  for (size_t i = whole; i < n; ++i) s += exp_nonpositive(logits[i] - m);
  return {m, std::log(s)};
}

float logprob_of(float logit, std::pair<double, double> lse) {
  if (logit == -INFINITY || lse.first == -INFINITY) return -INFINITY;
  return static_cast<float>(static_cast<double>(logit) - lse.first - lse.second);
}

// The k best (id, logprob) of a row under a precomputed log_sum_exp.
std::vector<std::pair<int32_t, float>> top_logprobs_with(std::span<const float> logits, int32_t k,
                                                         std::pair<double, double> lse) {
  size_t keep = std::min(static_cast<size_t>(std::max(k, 0)), logits.size());
  if (keep == 0) return {};
  std::vector<Candidate> cands(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    // NaN would break the strict weak order of better_candidate.
    TERN_CHECK(!std::isnan(logits[i]), "[sample] expected logits that are not NaN, got NaN at id {}", i);
    cands[i] = {static_cast<int32_t>(i), logits[i]};
  }
  std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), better_candidate);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) out.emplace_back(cands[i].id, logprob_of(cands[i].logit, lse));
  return out;
}

// Greedy pick: the first index of the largest logit; rejects rows make_candidates would reject (a
// row with NaN or +inf takes the scalar loop, which names the first bad id).
int32_t argmax_checked(std::span<const float> logits) {
  const RowScan scan = scan_row(logits);
  if (scan.clean) {
    TERN_CHECK(scan.max != -INFINITY, "[sample] expected at least one logit above -inf, got all {} at -inf",
               logits.size());
    return static_cast<int32_t>(std::find(logits.begin(), logits.end(), scan.max) - logits.begin());
  }
  size_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    float l = logits[i];
    TERN_CHECK(!std::isnan(l) && l != INFINITY, "[sample] expected logits that are finite or -inf, got {} at id {}", l,
               i);
    if (l > logits[best]) best = i;
  }
  TERN_CHECK(logits[best] != -INFINITY, "[sample] expected at least one logit above -inf, got all {} at -inf",
             logits.size());
  return static_cast<int32_t>(best);
}

}  // namespace

float raw_logprob(std::span<const float> logits, int32_t token) {
  TERN_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "[sample] expected a token in [0, {}), got {}",
             logits.size(), token);
  return logprob_of(logits[token], log_sum_exp(logits));
}

std::vector<std::pair<int32_t, float>> raw_top_logprobs(std::span<const float> logits, int32_t k) {
  return top_logprobs_with(logits, k, log_sum_exp(logits));
}

Sampler::Sampler(SamplingParams p) : params_(std::move(p)), rng_(params_.seed) {
  validate(params_, std::numeric_limits<int32_t>::max());
}

Sampler::Result Sampler::sample(const float* logits, int64_t vocab, std::span<const int32_t> history) {
  TERN_CHECK(logits != nullptr, "[sample] expected a logits pointer, got null");
  if (vocab != validated_vocab_) {
    validate(params_, vocab);
    validated_vocab_ = vocab;
  }
  std::span<const float> raw(logits, static_cast<size_t>(vocab));
  work_.assign(raw.begin(), raw.end());
  apply_logit_bias(work_, params_.logit_bias);
  apply_repetition_penalty(work_, history, params_.repetition_penalty);
  apply_presence_frequency_penalty(work_, history, params_.presence_penalty, params_.frequency_penalty);

  int32_t token;
  if (params_.temperature == 0.0f) {
    token = argmax_checked(work_);
  } else {
    apply_temperature(work_, params_.temperature);
    std::vector<Candidate> cands = warp(work_, params_);
    token = draw_candidate(cands, rng_.uniform());
  }

  Result r;
  r.token = token;
  auto lse = log_sum_exp(raw);
  r.logprob = logprob_of(raw[token], lse);
  if (params_.top_logprobs > 0) r.top_logprobs = top_logprobs_with(raw, params_.top_logprobs, lse);
  return r;
}

Sampler::Result Sampler::sample(const Tensor& logits, std::span<const int32_t> history) {
  TERN_CHECK(logits.defined(), "[sample] expected a logits tensor, got an undefined one");
  TERN_CHECK(logits.device().is_cpu(), "[sample] expected cpu logits, got {}", logits.device().str());
  TERN_CHECK(logits.dtype() == Dtype::f32, "[sample] expected f32 logits, got {}", dtype_name(logits.dtype()));
  TERN_CHECK(logits.rank() == 1 || (logits.rank() == 2 && logits.size(0) == 1),
             "[sample] expected logits [vocab] or [1, vocab], got {}", shape_str(logits.shape()));
  Tensor row = logits.contiguous();
  return sample(row.data<float>(), row.numel(), history);
}

}  // namespace tern
