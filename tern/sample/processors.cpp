// Logits processors (bias, penalties, temperature) over a full vocab row, and the candidate-list
// warpers (top-k, top-p, min-p) plus the inverse-CDF draw the Sampler uses.
#include "tern/sample/processors.h"

#include <algorithm>
#include <cmath>

#include "tern/base/error.h"

namespace tern {

namespace {

// (id, count) for each distinct id in history, ascending id; throws on ids outside [0, vocab).
std::vector<std::pair<int32_t, int32_t>> count_tokens(std::span<const int32_t> history, size_t vocab) {
  std::vector<int32_t> ids(history.begin(), history.end());
  std::sort(ids.begin(), ids.end());
  std::vector<std::pair<int32_t, int32_t>> counts;
  for (size_t i = 0; i < ids.size();) {
    int32_t id = ids[i];
    TERN_CHECK(id >= 0 && static_cast<size_t>(id) < vocab, "[sample] expected history ids in [0, {}), got {}", vocab,
               id);
    size_t j = i;
    while (j < ids.size() && ids[j] == id) ++j;
    counts.emplace_back(id, static_cast<int32_t>(j - i));
    i = j;
  }
  return counts;
}

float max_logit(const std::vector<Candidate>& cands) {
  float m = -INFINITY;
  for (const Candidate& c : cands) m = std::max(m, c.logit);
  return m;
}

}  // namespace

void apply_logit_bias(std::span<float> logits, const std::unordered_map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) {
    TERN_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "[sample] expected logit_bias ids in [0, {}), got {}",
               logits.size(), id);
    logits[id] += b;
  }
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history, float penalty) {
  if (penalty == 1.0f || history.empty()) return;
  TERN_CHECK(penalty > 0.0f, "[sample] expected repetition_penalty > 0, got {}", penalty);
  for (const auto& [id, count] : count_tokens(history, logits.size())) {
    float& l = logits[id];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

void apply_presence_frequency_penalty(std::span<float> logits, std::span<const int32_t> history, float presence,
                                      float frequency) {
  if ((presence == 0.0f && frequency == 0.0f) || history.empty()) return;
  for (const auto& [id, count] : count_tokens(history, logits.size())) {
    logits[id] -= presence + frequency * static_cast<float>(count);
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  TERN_CHECK(temperature > 0.0f, "[sample] expected temperature > 0 to scale logits, got {}", temperature);
  if (temperature == 1.0f) return;
  for (float& l : logits) l /= temperature;
}

std::vector<Candidate> make_candidates(std::span<const float> logits) {
  std::vector<Candidate> cands;
  cands.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    float l = logits[i];
    TERN_CHECK(!std::isnan(l) && l != INFINITY, "[sample] expected logits that are finite or -inf, got {} at id {}", l,
               i);
    if (l != -INFINITY) cands.push_back({static_cast<int32_t>(i), l});
  }
  TERN_CHECK(!cands.empty(), "[sample] expected at least one logit above -inf, got all {} at -inf", logits.size());
  return cands;
}

void top_k_filter(std::vector<Candidate>& cands, int32_t k) {
  if (k <= 0) return;
  size_t keep = std::min(static_cast<size_t>(k), cands.size());
  if (keep < cands.size()) {
    std::nth_element(cands.begin(), cands.begin() + keep, cands.end(), better_candidate);
    cands.resize(keep);
  }
  std::sort(cands.begin(), cands.end(), better_candidate);
}

void top_p_filter(std::vector<Candidate>& cands, float top_p) {
  if (top_p >= 1.0f || cands.size() <= 1) return;
  float m = max_logit(cands);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(static_cast<double>(c.logit) - m);
  bool sorted = std::is_sorted(cands.begin(), cands.end(), better_candidate);
  size_t prefix = sorted ? cands.size() : std::min<size_t>(1024, cands.size());
  for (;;) {
    if (!sorted) {
      if (prefix < cands.size()) {
        std::nth_element(cands.begin(), cands.begin() + prefix, cands.end(), better_candidate);
      }
      std::sort(cands.begin(), cands.begin() + prefix, better_candidate);
    }
    // A token is kept iff the mass strictly before it is < top_p (HF removes ascending cumsum <= 1 - p).
    double before = 0.0;
    for (size_t i = 0; i < prefix; ++i) {
      if (i > 0 && before >= top_p) {
        cands.resize(i);
        return;
      }
      before += std::exp(static_cast<double>(cands[i].logit) - m) / total;
    }
    if (prefix == cands.size()) return;  // the whole list is the nucleus
    prefix = std::min(prefix * 4, cands.size());
  }
}

void min_p_filter(std::vector<Candidate>& cands, float min_p) {
  if (min_p <= 0.0f || cands.empty()) return;
  float m = max_logit(cands);
  std::erase_if(cands, [&](const Candidate& c) {
    return std::exp(static_cast<double>(c.logit) - m) < static_cast<double>(min_p);
  });
}

std::vector<Candidate> warp(std::span<const float> logits, const SamplingParams& params) {
  std::vector<Candidate> cands = make_candidates(logits);
  top_k_filter(cands, params.top_k);
  top_p_filter(cands, params.top_p);
  min_p_filter(cands, params.min_p);
  return cands;
}

int32_t draw_candidate(std::vector<Candidate>& cands, float u) {
  TERN_ASSERT(!cands.empty(), "draw from an empty candidate list");
  TERN_CHECK(u >= 0.0f && u < 1.0f, "[sample] expected u in [0, 1), got {}", u);
  auto by_id = [](const Candidate& a, const Candidate& b) { return a.id < b.id; };
  if (!std::is_sorted(cands.begin(), cands.end(), by_id)) std::sort(cands.begin(), cands.end(), by_id);
  float m = max_logit(cands);
  double total = 0.0;
  for (const Candidate& c : cands) total += std::exp(c.logit - m);
  double target = static_cast<double>(u) * total;
  double cum = 0.0;
  for (const Candidate& c : cands) {
    cum += std::exp(c.logit - m);
    if (target < cum) return c.id;
  }
  return cands.back().id;
}

}  // namespace tern
