// Sampler: processors, greedy or seeded inverse-CDF draw, and raw-logit logprobs.
#include "tern/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/base/error.h"
#include "tern/sample/processors.h"
#include "tern/base/fast_exp.h"
#include "tern/sample/row_math.h"

namespace tern {

namespace {

// max and log(sum exp(l - max)) of a row: f32 exp terms (exp_f32) over an f64 sum kept in 8
// interleaved partial sums, added in a fixed order (the same row gives the same result every time);
// max is -inf for an all -inf row, and a row with NaN or +inf gives a NaN sum.
std::pair<double, double> log_sum_exp(std::span<const float> logits) {
  const size_t n = logits.size(), whole = n / kRowLanes * kRowLanes;
  const float m = scan_row(logits).max;
  if (m == -INFINITY) return {m, 0.0};
  double part[kRowLanes] = {};
  constexpr size_t kChunk = 1024;  // exp terms of a chunk, then their sums
  float terms[kChunk];
  for (size_t c = 0; c < whole; c += kChunk) {
    const size_t len = std::min(kChunk, whole - c);
    for (size_t i = 0; i < len; ++i) terms[i] = exp_f32(logits[c + i] - m);
    for (size_t i = 0; i < len; i += kRowLanes) {
      for (size_t j = 0; j < kRowLanes; ++j) part[j] += terms[i + j];
    }
  }
  double s = 0.0;
  for (size_t j = 0; j < kRowLanes; ++j) s += part[j];
  for (size_t i = whole; i < n; ++i) s += exp_f32(logits[i] - m);
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
  if (!scan_row(logits).clean) {  // NaN would break the strict weak order of better_candidate (+inf may stay)
    for (size_t i = 0; i < logits.size(); ++i)
      TERN_CHECK(!std::isnan(logits[i]), "[sample] expected logits that are not NaN, got NaN at id {}", i);
  }
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(keep);
  for (const Candidate& c : best_entries(logits, keep)) out.emplace_back(c.id, logprob_of(c.logit, lse));
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
    token = warp_and_draw(work_, params_, rng_);
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
