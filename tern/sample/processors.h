// Logits processors, applied by the Sampler in the transformers order: logit bias, repetition
// penalty, presence/frequency penalties, temperature; then the warpers top-k, top-p, min-p, which
// narrow a candidate list instead of rewriting the whole vocab row.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tern/sample/rng.h"
#include "tern/sample/sampling_params.h"

namespace tern {

// One surviving token and its processed logit.
struct Candidate {
  int32_t id;
  float logit;
};

// Score order used by every warper and by top_logprobs: higher logit first, ties toward lower id.
inline bool better_candidate(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// logits[id] += bias for every entry; throws if an id is outside [0, logits.size()).
void apply_logit_bias(std::span<float> logits, const std::unordered_map<int32_t, float>& bias);

// HF RepetitionPenaltyLogitsProcessor: for each DISTINCT id in history, logit > 0 -> logit / penalty,
// else logit * penalty. penalty == 1 is a no-op. Throws on a history id outside the vocab.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history, float penalty);

// OpenAI penalties: logit[id] -= presence * (count > 0) + frequency * count, count = occurrences of
// id in history. Throws on a history id outside the vocab.
void apply_presence_frequency_penalty(std::span<float> logits, std::span<const int32_t> history, float presence,
                                      float frequency);

// logits[i] /= temperature (temperature > 0; checked).
void apply_temperature(std::span<float> logits, float temperature);

// Every token whose logit is not -inf, in ascending id order. Throws on a NaN or +inf logit, or when
// every logit is -inf (nothing can be sampled).
std::vector<Candidate> make_candidates(std::span<const float> logits);

// The min(keep, n) best entries of a row (better_candidate order; -inf and +inf count like any
// value), sorted best first, from one pass with a heap. The row must hold no NaN.
std::vector<Candidate> best_entries(std::span<const float> logits, size_t keep);

// make_candidates then top_k_filter(k) in one pass over the row, without a Candidate per logit: the
// same list (the min(k, n) best, sorted best first) and the same errors. k > 0.
std::vector<Candidate> top_k_candidates(std::span<const float> logits, int32_t k);

// Keeps exactly min(k, n) best candidates (better_candidate order; HF keeps every token tied with the
// k-th, tern breaks ties toward lower id) and leaves them sorted best first. k <= 0 is a no-op.
// Selects with nth_element, so only the k survivors are sorted.
void top_k_filter(std::vector<Candidate>& cands, int32_t k);

// HF TopPLogitsWarper: with probabilities softmax over the candidates, keeps the smallest best-first
// (better_candidate order) set whose probability reaches top_p: a token is kept iff the mass of the
// tokens strictly before it is < top_p; always at least one. The masses are the draw's integer weights
// (tern/base/draw_weight.h: floor(exp_f32(logit - max) * 2^40), exact u64 sums, the target
// top_p_target), so every backend keeps the same set (ops::top_p_mask). Linear apart
// from sorting one histogram bin (1/32 logit wide) at the boundary; the survivors' order is
// unspecified. top_p >= 1 is a no-op.
void top_p_filter(std::vector<Candidate>& cands, float top_p);

// make_candidates then top_p_filter(top_p) for a whole row: the same kept set (order unspecified) and
// the same errors, building candidates only for the histogram bins the nucleus reaches (the whole list
// when they reach the bin 32 logits below the max).
std::vector<Candidate> top_p_candidates(std::span<const float> logits, float top_p);

// HF MinPLogitsWarper: keeps candidates with prob >= min_p * max_prob, tested in f32 as
// logit - max_logit >= log(min_p) (renormalisation cancels). The best token always survives; order is
// preserved.
// min_p <= 0 is a no-op.
void min_p_filter(std::vector<Candidate>& cands, float min_p);

// make_candidates then min_p_filter(min_p) for a whole row: the same list (ascending ids) and the
// same errors, without a candidate per logit.
std::vector<Candidate> min_p_candidates(std::span<const float> logits, float min_p);

// The warpers in order: make_candidates, then top-k, top-p, min-p as params ask. Non-empty result.
std::vector<Candidate> warp(std::span<const float> logits, const SamplingParams& params);
// Whether params turn any warper on (top_k > 0, top_p < 1 or min_p > 0); without one a row is drawn whole.
inline bool has_warper(const SamplingParams& params) {
  return params.top_k > 0 || params.top_p < 1.0f || params.min_p > 0.0f;
}

// make_candidates then draw_candidate(u) for a whole row (no warper): the same token and the same
// errors, without a candidate list.
int32_t draw_row(std::span<const float> logits, float u);

// warp(params) then draw_candidate(rng.uniform()); with no warper on (top_k <= 0, top_p >= 1,
// min_p <= 0), draw_row (the same id without a candidate list). The word is drawn only after the row
// passed make_candidates' checks: a rejected row throws and consumes none.
int32_t warp_and_draw(std::span<const float> logits, const SamplingParams& params, Rng& rng);

// Inverse-CDF draw in ascending id order with the integer weights of tern/base/draw_weight.h (exact
// sums, so the CUDA row draw ops::draw_index picks the same id): the first id whose running weight
// exceeds the target. u must be in [0, 1); cands non-empty, fewer than kDrawMaxIds. May reorder cands.
int32_t draw_candidate(std::vector<Candidate>& cands, float u);

}  // namespace tern
