// SamplingParams: what one request asks of the sampler (temperature, top-k/p, min-p, penalties,
// logit bias, seed, logprobs), and validate() that rejects nonsense before any sampling happens.
#pragma once
#include <cstdint>
#include <unordered_map>

namespace tern {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, no RNG draw); else logits / temperature
  int32_t top_k = 0;                // 0 = off; else keep the k best (exactly k, ties toward lower id)
  float top_p = 1.0f;               // 1 = off; else keep the smallest nucleus with mass >= top_p
  float min_p = 0.0f;               // 0 = off; else keep prob >= min_p * max_prob
  float repetition_penalty = 1.0f;  // 1 = off; HF semantics over the distinct ids in the history
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence * (count > 0)
  float frequency_penalty = 0.0f;   // OpenAI: logit -= frequency * count
  std::unordered_map<int32_t, float> logit_bias;  // token id -> added to its logit; -inf bans it
  uint64_t seed = 0;                // seeds the Rng (Philox4x32-10)
  int32_t top_logprobs = 0;         // how many best alternatives to report (clamped to vocab)
};

// Throws tern::Error naming the first bad field: vocab <= 0, temperature negative or not finite,
// top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repetition_penalty <= 0 or not finite,
// presence/frequency penalty not finite, a logit_bias id outside [0, vocab) or a bias that is NaN
// or +inf, top_logprobs < 0.
void validate(const SamplingParams& p, int64_t vocab);

}  // namespace tern
