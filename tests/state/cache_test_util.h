// Helpers the cache tests share: random N(0, 1) tensors from a seeded engine, and the largest
// element-wise difference of two tensors (a size mismatch fails the calling test).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tern/core/tensor.h"

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

}  // namespace tern::cache_test
