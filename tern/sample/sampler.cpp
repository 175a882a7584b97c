// Sampler: processors, greedy or seeded inverse-CDF draw, and raw-logit logprobs.
#include "tern/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/base/error.h"

namespace tern {

namespace {

// max and log(sum exp(l - max)) of a row, in f64; max is -inf for an all -inf row.
std::pair<double, double> log_sum_exp(std::span<const float> logits) {
  double m = -INFINITY;
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  if (m == -INFINITY) return {m, 0.0};
  double s = 0.0;
  for (float l : logits) s += std::exp(static_cast<double>(l) - m);
  return {m, std::log(s)};
}

float logprob_of(float logit, std::pair<double, double> lse) {
  if (logit == -INFINITY || lse.first == -INFINITY) return -INFINITY;
  return static_cast<float>(static_cast<double>(logit) - lse.first - lse.second);
}

}  // namespace

float raw_logprob(std::span<const float> logits, int32_t token) {
  TERN_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "[sample] expected a token in [0, {}), got {}",
             logits.size(), token);
  return logprob_of(logits[token], log_sum_exp(logits));
}

std::vector<std::pair<int32_t, float>> raw_top_logprobs(std::span<const float> logits, int32_t k) {
  size_t keep = std::min(static_cast<size_t>(std::max(k, 0)), logits.size());
  if (keep == 0) return {};
  std::vector<Candidate> cands(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands[i] = {static_cast<int32_t>(i), logits[i]};
  // NaN logits would break the strict weak order; make_candidates rejects them on the sampling path.
  for (const Candidate& c : cands) {
    TERN_CHECK(!std::isnan(c.logit), "[sample] expected logits that are not NaN, got NaN at id {}", c.id);
  }
  std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), better_candidate);
  auto lse = log_sum_exp(logits);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) out.emplace_back(cands[i].id, logprob_of(cands[i].logit, lse));
  return out;
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
    // make_candidates checks the row (NaN, +inf, all -inf) exactly as the sampling path does.
    std::vector<Candidate> cands = make_candidates(work_);
    token = std::min_element(cands.begin(), cands.end(), better_candidate)->id;
  } else {
    apply_temperature(work_, params_.temperature);
    std::vector<Candidate> cands = warp(work_, params_);
    token = draw_candidate(cands, rng_.uniform());
  }

  Result r;
  r.token = token;
  auto lse = log_sum_exp(raw);
  r.logprob = logprob_of(raw[token], lse);
  if (params_.top_logprobs > 0) r.top_logprobs = raw_top_logprobs(raw, params_.top_logprobs);
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
