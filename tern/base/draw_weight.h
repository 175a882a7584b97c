// The sampler's inverse-CDF draw in integers, so that every backend draws the same id from the same
// logits and u: weight_i = floor(exp_f32(logit_i - max_logit) * 2^40) (0 for -inf, and for logits more
// than about 27.7 below the max: probability under 2^-40 of the best token's), summed exactly in u64;
// target = floor(floor(u * 2^24) * total / 2^24); the draw is the first id with target < weight_0 + ...
// + weight_i. Files that compute weights build with -ffp-contract=off (and -fno-trapping-math, so the
// exps vectorise; CMakeLists.txt), so exp_f32 is the same IEEE f32 sequence on the host as the CUDA
// kernels' copy of it (kernels/draw.cuh).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tern/base/fast_exp.h"

namespace tern {

// Weights are at most 2^40, so a row of fewer than 2^23 ids sums below 2^63.
constexpr int64_t kDrawMaxIds = int64_t(1) << 23;

// The weight of e = exp_f32(logit - max_logit), e in [0, 1] (max_logit the row's max, finite; the
// logit not NaN).
inline uint64_t draw_weight_of(float e) { return static_cast<uint64_t>(static_cast<int64_t>(e * 0x1p40f)); }

// u in [0, 1): the target below total.
inline uint64_t draw_target(float u, uint64_t total) {
  const auto q = static_cast<uint64_t>(u * 0x1p24f);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(q) * total) >> 24);
}

// Top-p in the same integers: over the weights above (total their sum), a token in best-first order
// (higher logit first, ties by lower id) is kept iff the weights before it sum below
// top_p_target(top_p_fraction(top_p), total) = max(1, ceil(floor(top_p * 2^64) * total / 2^64)),
// exact, so the first token is always kept. top_p in (0, 1]; 1 keeps every token of positive weight.
inline uint64_t top_p_fraction(float top_p) {
  return top_p >= 1.0f ? ~uint64_t(0) : static_cast<uint64_t>(static_cast<double>(top_p) * 0x1p64);
}
inline uint64_t top_p_target(uint64_t fraction, uint64_t total) {
  const unsigned __int128 x = static_cast<unsigned __int128>(fraction) * total;
  const auto t = static_cast<uint64_t>(x >> 64) + (static_cast<uint64_t>(x) != 0 ? 1 : 0);
  return t > 0 ? t : 1;
}

// The draw over a whole row of n logits (n < kDrawMaxIds) whose max is max_logit: the exps go through
// a chunk buffer so they vectorise (the conversion to integer weights does not), and the walk skips
// whole chunks by their sums. Returns n - 1 if the target is not below the total (only when max_logit
// is not the row's max). The ops' CPU row draw and the host sampler both call it.
inline int64_t draw_row_index(const float* logits, int64_t n, float max_logit, float u) {
  constexpr int64_t kChunk = 1024;
  float e[kChunk];
  auto exps = [&](int64_t c, int64_t len) {
    for (int64_t i = 0; i < len; ++i) e[i] = exp_f32(logits[c + i] - max_logit);
  };
  std::vector<uint64_t> sums(static_cast<size_t>((n + kChunk - 1) / kChunk));
  uint64_t total = 0;
  for (size_t k = 0; k < sums.size(); ++k) {
    const int64_t c = static_cast<int64_t>(k) * kChunk, len = std::min(kChunk, n - c);
    exps(c, len);
    uint64_t s = 0;
    for (int64_t i = 0; i < len; ++i) s += draw_weight_of(e[i]);
    sums[k] = s;
    total += s;
  }
  const uint64_t target = draw_target(u, total);
  uint64_t cum = 0;
  for (size_t k = 0; k < sums.size(); ++k) {
    if (target >= cum + sums[k]) {
      cum += sums[k];
      continue;
    }
    const int64_t c = static_cast<int64_t>(k) * kChunk, len = std::min(kChunk, n - c);
    exps(c, len);
    for (int64_t i = 0; i < len; ++i) {
      cum += draw_weight_of(e[i]);
      if (target < cum) return c + i;
    }
  }
  return n - 1;
}

}  // namespace tern
