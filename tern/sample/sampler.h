// Sampler: one row of f32 logits -> one token, on the host. Processors run in the transformers order,
// the draw is an inverse CDF over the kept candidates in ascending id order with one Rng word, and
// logprobs come from the raw (unprocessed) logits, as OpenAI reports them.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tern/core/tensor.h"
#include "tern/sample/processors.h"
#include "tern/sample/rng.h"
#include "tern/sample/sampling_params.h"

namespace tern {

class Sampler {
 public:
  struct Result {
    int32_t token;    // the chosen id
    float logprob;    // log_softmax(raw logits)[token]; -inf if the raw logit was -inf
    std::vector<std::pair<int32_t, float>> top_logprobs;  // min(top_logprobs, vocab) best raw (id, logprob),
                                                          // descending, ties toward lower id
  };

  // Validates p's vocab-independent fields (throws tern::Error) and seeds the Rng with p.seed.
  explicit Sampler(SamplingParams p);

  // Picks the next token from logits[0, vocab). history: prompt + generated ids, for the penalties.
  //  1. logit bias, repetition penalty, presence/frequency penalties on a copy of the row;
  //  2. temperature == 0: argmax of that row (first index on ties), no Rng draw;
  //  3. else temperature, top-k, top-p, min-p (see processors.h), then draw_candidate with exactly one
  //     rng().uniform() per call.
  // Throws tern::Error on bad params for this vocab, history ids outside [0, vocab), NaN or +inf logits
  // after processing, or a row that is all -inf. The raw logits are never modified.
  Result sample(const float* logits, int64_t vocab, std::span<const int32_t> history = {});
  // Same, from a CPU f32 tensor [vocab] or [1, vocab] (any strides).
  Result sample(const Tensor& logits, std::span<const int32_t> history = {});

  const SamplingParams& params() const { return params_; }
  // The random stream; its position() is the number of words drawn so far.
  const Rng& rng() const { return rng_; }
  // The same stream, writable: for a sampler that runs the processors elsewhere (DeviceSampler) and
  // draws from this stream so both stay in step.
  Rng& mutable_rng() { return rng_; }

 private:
  SamplingParams params_;
  Rng rng_;
  int64_t validated_vocab_ = 0;
  std::vector<float> work_;  // processed copy of the row, reused across calls
};

// log_softmax(logits)[token] for one raw row (f32 exp terms over an f64 sum); -inf for a -inf logit.
float raw_logprob(std::span<const float> logits, int32_t token);

// The k best (id, log_softmax) of a raw row (k clamped to the row), descending, ties toward lower id.
std::vector<std::pair<int32_t, float>> raw_top_logprobs(std::span<const float> logits, int32_t k);

}  // namespace tern
