// Vectorised row arithmetic for the sampler's whole-row passes: scan_row (a row's max, and whether it
// holds NaN or +inf). Its loop vectorises only where the compiler may speculate f32 compares
// (-fno-trapping-math, CMakeLists.txt). Softmax weights use exp_f32 (tern/base/fast_exp.h).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace tern {

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
