// Helpers the cache tests share: random N(0, 1) tensors from a seeded engine, the largest element-wise
// difference of two tensors (a size mismatch fails the calling test), and a decode under a DeviceStep
// checked against the same decode without one.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tern/ops/rope.h"
#include "tern/state/cache.h"

namespace tern::cache_test {

inline Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  if (x.size() != y.size()) return 1e30f;
  float m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// Decodes `steps` random positions through `ordinary` and through `stepped` under a DeviceStep at
// positions P.. (span `span`, attached here and detached at the end, advanced after each step), with Hq
// query heads over the caches' [B, H, ., D] rows: the RoPE positions agree exactly, the reads within
// 1e-6, and an append under the step leaves offset() alone.
inline void expect_step_decodes_equal(KVCache& ordinary, KVCache& stepped, int64_t P, int64_t steps, int64_t span,
                                      int64_t Hq, std::mt19937& rng) {
  const int64_t B = 2, H = 2, D = 8;
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P)), {B});
  step.lengths = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P + 1)), {B});
  step.span = span;
  stepped.attach_step(&step);
  ops::RopeConfig rc;
  rc.head_dim = D;
  ops::RopeTable rope = ops::rope_table(rc);
  for (int64_t s = 0; s < steps; ++s) {
    Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng),
           v = random_tensor({B, H, 1, D}, rng);
    EXPECT_EQ(max_abs_diff(ordinary.rope_positions(q, rope), stepped.rope_positions(q, rope)), 0.0f);
    Tensor want = ordinary.append(k, v, AppendPhase::decode)->attend(q, 0.35f);
    Tensor got = stepped.append(k, v, AppendPhase::decode)->attend(q, 0.35f);
    EXPECT_LT(max_abs_diff(want, got), 1e-6f) << "step " << s;
    EXPECT_EQ(stepped.offset(), P + s) << "an append under a step leaves offset() alone";
    stepped.advance(1);
    for (int64_t b = 0; b < B; ++b) {
      step.positions.data<int32_t>()[b] += 1;
      step.lengths.data<int32_t>()[b] += 1;
    }
  }
  stepped.attach_step(nullptr);
}

}  // namespace tern::cache_test
