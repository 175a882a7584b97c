// The sampler's inverse-CDF draw in integers, so that every backend draws the same id from the same
// logits and u: weight_i = floor(exp_f32(logit_i - max_logit) * 2^40) (0 for -inf, and for logits more
// than about 27.7 below the max: probability under 2^-40 of the best token's), summed exactly in u64;
// target = floor(floor(u * 2^24) * total / 2^24); the draw is the first id with target < weight_0 + ...
// + weight_i. Files that compute weights build with -ffp-contract=off (CMakeLists.txt), so exp_f32 is
// the same IEEE f32 sequence on the host as the CUDA kernels' copy of it (kernels/draw.cuh).
#pragma once
#include <cstdint>

#include "tern/base/fast_exp.h"

namespace tern {

// Weights are at most 2^40, so a row of fewer than 2^23 ids sums below 2^63.
constexpr int64_t kDrawMaxIds = int64_t(1) << 23;

// The weight of e = exp_f32(logit - max_logit), e in [0, 1].
inline uint64_t draw_weight_of(float e) { return static_cast<uint64_t>(static_cast<int64_t>(e * 0x1p40f)); }

// max_logit: the row's max (finite); logit <= max_logit, not NaN.
inline uint64_t draw_weight(float logit, float max_logit) { return draw_weight_of(exp_f32(logit - max_logit)); }

// u in [0, 1): the target below total.
inline uint64_t draw_target(float u, uint64_t total) {
  const auto q = static_cast<uint64_t>(u * 0x1p24f);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(q) * total) >> 24);
}

}  // namespace tern
