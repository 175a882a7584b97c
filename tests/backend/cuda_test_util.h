// Shared pieces of the CUDA-vs-CPU tests: the GPU device, a fixture that skips cleanly without a GPU
// (and initialises CUDA otherwise), seeded normal tensors and the NMSE the tests bound.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tern/core/tensor.h"
#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"

namespace tern::cuda_test {

inline const Device kGpu = Device::cuda(0);

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_status();
    cuda_init();
  }
};

// An f32 CPU tensor of N(0, sigma^2) values from seed.
inline Tensor randn(const Shape& shape, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = d(rng);
  return Tensor::from_vector(v, shape);
}

// An environment switch (the backend's TERN_CUDA_* benchmark knobs) for the life of the object: set(value)
// sets it, or unsets it for nullptr or "", and the destructor puts back what was there before -- also when
// an assertion ends the test early, so no switch leaks into the tests after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    set(value);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) {
    if (value && *value) {
      setenv(name_.c_str(), value, 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A CPU tensor of integers uniform in [0, hi) from seed, in dtype dt (i64, or cast to it).
inline Tensor randint(const Shape& shape, int64_t hi, Dtype dt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = dist(rng);
  Tensor t = Tensor::from_vector(v, shape);
  return dt == Dtype::i64 ? t : ops::cast(t, dt);
}

// sum (ref - got)^2 / sum ref^2 over both tensors (any device); 1e30 for a size mismatch or a
// non-finite value in got.
inline double nmse(const Tensor& ref, const Tensor& got) {
  std::vector<float> r = ref.to(Device::cpu()).to_f32_vector(), g = got.to(Device::cpu()).to_f32_vector();
  EXPECT_EQ(r.size(), g.size());
  if (r.size() != g.size()) return 1e30;
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!std::isfinite(g[i])) return 1e30;
    num += (double(r[i]) - g[i]) * (double(r[i]) - g[i]);
    den += double(r[i]) * r[i];
  }
  return den > 0 ? num / den : num;
}

// The bytes of a tensor on either device (copied to the host, contiguous): for bit-for-bit comparisons.
inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu()).contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(h.data_ptr());
  return std::vector<uint8_t>(p, p + h.nbytes());
}

}  // namespace tern::cuda_test
