// validate(SamplingParams): field-by-field checks with "[sample] expected X, got Y" messages.
#include "tern/sample/sampling_params.h"

#include <cmath>

#include "tern/base/error.h"

namespace tern {

void validate(const SamplingParams& p, int64_t vocab) {
  TERN_CHECK(vocab > 0, "[sample] expected vocab > 0, got {}", vocab);
  TERN_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0f,
             "[sample] expected temperature >= 0 and finite, got {}", p.temperature);
  TERN_CHECK(p.top_k >= 0, "[sample] expected top_k >= 0 (0 = off), got {}", p.top_k);
  TERN_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "[sample] expected top_p in (0, 1], got {}", p.top_p);
  TERN_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "[sample] expected min_p in [0, 1], got {}", p.min_p);
  TERN_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f,
             "[sample] expected repetition_penalty > 0 and finite, got {}", p.repetition_penalty);
  TERN_CHECK(std::isfinite(p.presence_penalty), "[sample] expected a finite presence_penalty, got {}",
             p.presence_penalty);
  TERN_CHECK(std::isfinite(p.frequency_penalty), "[sample] expected a finite frequency_penalty, got {}",
             p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    TERN_CHECK(id >= 0 && id < vocab, "[sample] expected logit_bias ids in [0, {}), got {}", vocab, id);
    TERN_CHECK(!std::isnan(bias) && bias != INFINITY,
               "[sample] expected logit_bias for id {} to be finite or -inf, got {}", id, bias);
  }
  TERN_CHECK(p.top_logprobs >= 0, "[sample] expected top_logprobs >= 0, got {}", p.top_logprobs);
}

}  // namespace tern
