// Logits processors (bias, penalties, temperature) over a full vocab row, and the candidate-list
// warpers (top-k, top-p, min-p) plus the inverse-CDF draw the Sampler uses.
#include "tern/sample/processors.h"

#include <algorithm>
#include <cmath>

#include "tern/base/draw_weight.h"
#include "tern/base/error.h"
#include "tern/base/fast_exp.h"
#include "tern/sample/row_math.h"

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

// The row's max, which is its candidates' max; a row make_candidates rejects raises its error here.
float candidate_max(std::span<const float> logits) {
  const RowScan scan = scan_row(logits);
  if (!scan.clean || scan.max == -INFINITY) make_candidates(logits);  // throws
  return scan.max;
}

}  // namespace

void apply_logit_bias(std::span<float> logits, const std::unordered_map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) {
    TERN_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(),
               "[sample] expected logit_bias ids in [0, {}), got {}", logits.size(), id);
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

std::vector<Candidate> best_entries(std::span<const float> logits, size_t keep) {
  keep = std::min(keep, logits.size());
  // A heap of the best so far, the worst on top. Ids rise with the scan, so a logit equal to the worst
  // kept one loses the tie: only a strictly larger logit can enter a full heap, and blocks of 16 with
  // none above that bar are passed over in one vectorised test.
  std::vector<Candidate> heap;
  heap.reserve(keep);
  if (keep == 0) return heap;
  float bar = -INFINITY;  // the worst kept logit once the heap is full
  const size_t n = logits.size();
  constexpr size_t kBlock = 16;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(b + kBlock, n);
    if (heap.size() == keep) {
      bool quiet = true;
      for (size_t i = b; i < e; ++i) quiet &= logits[i] <= bar;
      if (quiet) continue;
    }
    for (size_t i = b; i < e; ++i) {
      const float l = logits[i];
      if (heap.size() < keep) {
        heap.push_back({static_cast<int32_t>(i), l});
        std::push_heap(heap.begin(), heap.end(), better_candidate);
        if (heap.size() == keep) bar = heap.front().logit;
      } else if (l > bar) {
        std::pop_heap(heap.begin(), heap.end(), better_candidate);
        heap.back() = {static_cast<int32_t>(i), l};
        std::push_heap(heap.begin(), heap.end(), better_candidate);
        bar = heap.front().logit;
      }
    }
  }
  std::sort(heap.begin(), heap.end(), better_candidate);
  return heap;
}

std::vector<Candidate> top_k_candidates(std::span<const float> logits, int32_t k) {
  TERN_CHECK(k > 0, "[sample] expected top_k > 0, got {}", k);
  candidate_max(logits);
  std::vector<Candidate> best = best_entries(logits, static_cast<size_t>(k));
  while (best.back().logit == -INFINITY) best.pop_back();  // -inf logits are no candidates (they sort last)
  return best;
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

namespace {

// The top-p walk's histogram: bins 1/32 logit wide below the max m, the last one holding everything
// from 32 logits down (-inf included).
constexpr int kTopPBins = 1024;
inline int top_p_bin(float m, float logit) {
  return static_cast<int>(std::min((m - logit) * 32.0f, static_cast<float>(kTopPBins - 1)));
}

// The first bin where the integer mass reaches target (the last bin if none does); before: the mass
// of the bins above it.
int crossing_bin(const std::vector<uint64_t>& bin_mass, uint64_t target, uint64_t& before) {
  int cross = 0;
  before = 0;
  while (cross < kTopPBins - 1 && before + bin_mass[cross] < target) before += bin_mass[cross++];
  return cross;
}

// The top-p walk for cands that hold every candidate of bins <= cross (bins past it may be absent),
// where cross is the crossing bin and before the mass of the bins above it: the candidates of the
// bins above are kept unsorted; only the crossing bin is sorted and walked best first. A token is kept
// iff the weight strictly before it is below target (HF removes ascending cumsum <= 1 - p); the walk
// closes inside the crossing bin, whose mass reaches the target. Moves the kept ones to the front and
// returns how many.
size_t walk_crossing_bin(std::vector<Candidate>& cands, float m, int cross, uint64_t before, uint64_t target) {
  auto bin_of = [&](float logit) { return top_p_bin(m, logit); };
  auto inner_end =
      std::partition(cands.begin(), cands.end(), [&](const Candidate& c) { return bin_of(c.logit) < cross; });
  auto cross_end =
      std::partition(inner_end, cands.end(), [&](const Candidate& c) { return bin_of(c.logit) == cross; });
  std::sort(inner_end, cross_end, better_candidate);
  for (auto it = inner_end; it != cross_end; ++it) {
    if (it != cands.begin() && before >= target) return static_cast<size_t>(it - cands.begin());
    before += draw_weight_of(exp_f32(it->logit - m));
  }
  return static_cast<size_t>(cross_end - cands.begin());
}

}  // namespace

void top_p_filter(std::vector<Candidate>& cands, float top_p) {
  if (top_p >= 1.0f || cands.size() <= 1) return;
  const float m = max_logit(cands);
  // The exps in one vectorisable pass over a reused buffer, then the integer weights and their bins.
  thread_local std::vector<float> e;
  e.resize(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) e[i] = cands[i].logit;
  for (size_t i = 0; i < cands.size(); ++i) e[i] = exp_f32(e[i] - m);
  std::vector<uint64_t> bin_mass(kTopPBins, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    const uint64_t w = draw_weight_of(e[i]);
    total += w;
    bin_mass[top_p_bin(m, cands[i].logit)] += w;
  }
  const uint64_t target = top_p_target(top_p_fraction(top_p), total);
  uint64_t before = 0;
  const int cross = crossing_bin(bin_mass, target, before);
  cands.resize(walk_crossing_bin(cands, m, cross, before, target));
}

std::vector<Candidate> top_p_candidates(std::span<const float> logits, float top_p) {
  const float m = candidate_max(logits);
  if (top_p >= 1.0f) return make_candidates(logits);
  // top_p_filter's total and histogram over the row: a -inf logit weighs 0 and is counted in no bin.
  const size_t n = logits.size();
  std::vector<uint64_t> bin_mass(kTopPBins, 0);
  uint64_t total = 0;
  constexpr size_t kChunk = 1024;
  float e[kChunk];
  for (size_t c = 0; c < n; c += kChunk) {
    const size_t len = std::min(kChunk, n - c);
    for (size_t i = 0; i < len; ++i) e[i] = exp_f32(logits[c + i] - m);
    for (size_t i = 0; i < len; ++i) {
      const float l = logits[c + i];
      if (l == -INFINITY) continue;
      const uint64_t w = draw_weight_of(e[i]);
      total += w;
      bin_mass[top_p_bin(m, l)] += w;
    }
  }
  const uint64_t target = top_p_target(top_p_fraction(top_p), total);
  uint64_t before = 0;
  const int cross = crossing_bin(bin_mass, target, before);
  // Candidates only for the bins through the crossing one (id order; the walk reorders them).
  std::vector<Candidate> best;
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[i];
    if (l != -INFINITY && top_p_bin(m, l) <= cross) best.push_back({static_cast<int32_t>(i), l});
  }
  best.resize(walk_crossing_bin(best, m, cross, before, target));
  return best;
}

void min_p_filter(std::vector<Candidate>& cands, float min_p) {
  if (min_p <= 0.0f || cands.empty()) return;
  // prob >= min_p * max_prob  <=>  logit - max_logit >= log(min_p); no exp per token.
  float m = max_logit(cands);
  float floor = std::log(min_p);
  std::erase_if(cands, [&](const Candidate& c) { return c.logit - m < floor; });
}

std::vector<Candidate> min_p_candidates(std::span<const float> logits, float min_p) {
  const float m = candidate_max(logits);
  if (min_p <= 0.0f) return make_candidates(logits);
  // min_p_filter's test on the whole row; -inf never passes.
  const float floor = std::log(min_p);
  std::vector<Candidate> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (l != -INFINITY && !(l - m < floor)) c.push_back({static_cast<int32_t>(i), l});
  }
  return c;
}

std::vector<Candidate> warp(std::span<const float> logits, const SamplingParams& params) {
  std::vector<Candidate> cands;
  if (params.top_k > 0) {
    cands = top_k_candidates(logits, params.top_k);
    top_p_filter(cands, params.top_p);
  } else if (params.top_p < 1.0f) {
    cands = top_p_candidates(logits, params.top_p);
  } else {
    return min_p_candidates(logits, params.min_p);
  }
  min_p_filter(cands, params.min_p);
  return cands;
}

namespace {

// draw_row for a row whose max m candidate_max has checked: draw_candidate's rule over the whole row
// (a -inf logit weighs 0).
int32_t draw_checked_row(std::span<const float> logits, float m, float u) {
  TERN_CHECK(u >= 0.0f && u < 1.0f, "[sample] expected u in [0, 1), got {}", u);
  const auto n = static_cast<int64_t>(logits.size());
  TERN_CHECK(n < kDrawMaxIds, "[sample] expected fewer than {} logits, got {}", kDrawMaxIds, n);
  return static_cast<int32_t>(draw_row_index(logits.data(), n, m, u));
}

}  // namespace

int32_t draw_row(std::span<const float> logits, float u) {
  return draw_checked_row(logits, candidate_max(logits), u);
}

int32_t warp_and_draw(std::span<const float> logits, const SamplingParams& params, Rng& rng) {
  // The row is checked before the draw takes its word, so a rejected row consumes none.
  if (!has_warper(params)) {
    const float m = candidate_max(logits);  // its own statement: before the word is drawn
    return draw_checked_row(logits, m, rng.uniform());
  }
  std::vector<Candidate> cands = warp(logits, params);
  return draw_candidate(cands, rng.uniform());
}

int32_t draw_candidate(std::vector<Candidate>& cands, float u) {
  TERN_ASSERT(!cands.empty(), "draw from an empty candidate list");
  TERN_CHECK(u >= 0.0f && u < 1.0f, "[sample] expected u in [0, 1), got {}", u);
  const size_t n = cands.size();
  TERN_CHECK(static_cast<int64_t>(n) < kDrawMaxIds, "[sample] expected fewer than {} candidates, got {}", kDrawMaxIds,
             n);
  const float m = max_logit(cands);
  // Each exp once: the logits gathered into a reused buffer, their exps in one vectorisable pass; the
  // integer weights are cheap conversions of those. Integer sums are exact, so the total's order does
  // not matter; the walk is in id order.
  thread_local std::vector<float> buffer;
  buffer.resize(n);
  float* e = buffer.data();
  for (size_t i = 0; i < n; ++i) e[i] = cands[i].logit;
  for (size_t i = 0; i < n; ++i) e[i] = exp_f32(e[i] - m);
  auto w = [&](size_t i) { return draw_weight_of(e[i]); };
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += w(i);
  const uint64_t target = draw_target(u, total);
  auto by_id = [](const Candidate& a, const Candidate& b) { return a.id < b.id; };
  uint64_t cum = 0;
  if (std::is_sorted(cands.begin(), cands.end(), by_id)) {
    for (size_t i = 0; i < n; ++i) {
      cum += w(i);
      if (target < cum) return cands[i].id;
    }
  } else if (n <= 1024) {
    std::vector<uint32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return cands[a].id < cands[b].id; });
    for (uint32_t i : order) {
      cum += w(i);
      if (target < cum) return cands[i].id;
    }
  } else {
    // A large unsorted set (a wide nucleus) is scattered into a dense id row instead of sorted:
    // absent ids weigh 0.
    int32_t max_id = 0;
    for (const Candidate& c : cands) max_id = std::max(max_id, c.id);
    std::vector<uint64_t> dense(static_cast<size_t>(max_id) + 1, 0);
    for (size_t i = 0; i < n; ++i) dense[cands[i].id] = w(i);
    for (size_t id = 0; id < dense.size(); ++id) {
      cum += dense[id];
      if (target < cum) return static_cast<int32_t>(id);
    }
  }
  TERN_ASSERT(false, "the draw's target {} is not below its total {}", target, total);
  return 0;
}

}  // namespace tern
