// Shared pieces of the CPU op tests: seeded uniform tensors in any storage dtype, and rounding to one.
#pragma once
#include <cstdint>
#include <random>

#include "tern/core/tensor.h"

namespace tern::ops_test {

// A CPU tensor of dtype dt whose elements are uniform in [lo, hi) from seed, each rounded to dt.
inline Tensor random_uniform(const Shape& shape, Dtype dt, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::empty(shape, dt);
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(u(rng));
  });
  return t;
}

// v rounded to what storing it in dt keeps.
inline float round_to(float v, Dtype dt) {
  if (dt == Dtype::bf16) return bf16(v);
  if (dt == Dtype::f16) return f16(v);
  return v;
}

}  // namespace tern::ops_test
