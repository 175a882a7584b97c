// Vectorised row arithmetic for the sampler's whole-row and whole-candidate-list passes: exp_nonpositive
// (softmax weights relative to a row's max) and scan_row (a row's max, and whether it holds NaN or +inf).
// Their loops vectorise only where the compiler may speculate f32 compares (-fno-trapping-math, CMake).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tern {

// e^x for x <= 0 or -inf (not NaN), in f32 arithmetic the compiler vectorises: x = n ln2 + r with |r| <= ln2 / 2,
// e^r by its Taylor series to r^7 (relative error below 1e-8, then the f32 rounding of 8 fused steps:
// within about 2 ulp of the correctly rounded value), times 2^n; results below 2^-126 (x < -87.3)
// flush to 0, which moves no sum that also holds e^0 = 1 by more than 1e-38 of it.
inline float exp_nonpositive(float x) {
  x = std::max(x, -104.0f);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest (|x log2 e| < 2^22)
  float r = std::fma(n, -0.693145751953125f, x);                  // ln 2, split so n * hi is exact
  r = std::fma(n, -1.428606765330187e-06f, r);
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  // 2^n from its exponent bits; n <= -127 gives the bits of +0 (no branch, so the loop vectorises)
  const int32_t e = std::max(static_cast<int32_t>(n), -127);
  return p * std::bit_cast<float>((e + 127) << 23);
}

constexpr size_t kRowLanes = 8;  // the vector loops' width (8 f32 lanes of AVX2)

// A row's max, and whether every logit is below +inf (no NaN, no +inf: then the max is exact whatever
// order the lanes took), in one vectorised pass.
struct RowScan {
  float max;
  bool clean;
};
inline RowScan scan_row(std::span<const float> logits) {
  const size_t n = logits.size(), whole = n / kRowLanes * kRowLanes;
  float lane_max[kRowLanes], lane_ok[kRowLanes];  // lane_ok: 1 while every logit seen was < +inf
  for (size_t j = 0; j < kRowLanes; ++j) lane_max[j] = -INFINITY, lane_ok[j] = 1.0f;
  for (size_t i = 0; i < whole; i += kRowLanes) {
    for (size_t j = 0; j < kRowLanes; ++j) {  // selects rather than std::max: GCC vectorises these
      const float l = logits[i + j];
      lane_max[j] = lane_max[j] < l ? l : lane_max[j];
      lane_ok[j] = l < INFINITY ? lane_ok[j] : 0.0f;  // 0 once a NaN or +inf went by
    }
  }
  RowScan r{-INFINITY, true};
  for (size_t j = 0; j < kRowLanes; ++j) r.max = std::max(r.max, lane_max[j]), r.clean = r.clean && lane_ok[j] == 1.0f;
  for (size_t i = whole; i < n; ++i) r.max = std::max(r.max, logits[i]), r.clean = r.clean && logits[i] < INFINITY;
  return r;
}

}  // namespace tern
