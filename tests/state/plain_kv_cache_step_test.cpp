// PlainKVCache under a DeviceStep (the compiled-decode path, run here on the CPU): appends land at the
// step's positions, RoPE takes those positions, the read over the step's span masked by its lengths
// equals the ordinary decode read, and offset() moves only through advance().
#include <gtest/gtest.h>

#include <random>

#include "tern/ops/rope.h"
#include "tern/state/plain_kv_cache.h"
#include "tests/state/cache_test_util.h"

namespace tern {
namespace {

using namespace cache_test;

TEST(PlainKVCacheStep, DecodeThroughDeviceStepEqualsOrdinaryDecode) {
  std::mt19937 rng(3);
  const int64_t B = 2, H = 2, Hq = 4, D = 8, P = 5, steps = 4;
  PlainKVCache plain, stepped;
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  plain.append(k0, v0, AppendPhase::window);
  stepped.append(k0, v0, AppendPhase::window);
  stepped.reserve(P + steps);
  ASSERT_GE(stepped.capacity(), P + steps);

  // a span past the stored prefix: the lengths must hide the rest
  expect_step_decodes_equal(plain, stepped, P, steps, stepped.capacity(), Hq, rng);
  EXPECT_EQ(stepped.offset(), plain.offset());
  EXPECT_EQ(max_abs_diff(stepped.keys(), plain.keys()), 0.0f);
  EXPECT_EQ(max_abs_diff(stepped.values(), plain.values()), 0.0f);
}

TEST(PlainKVCacheStep, ClearErrors) {
  std::mt19937 rng(4);
  PlainKVCache c, windowed(4);
  EXPECT_THROW(c.reserve(8), Error);  // no shapes yet
  EXPECT_FALSE(windowed.supports_device_step());
  c.append(random_tensor({1, 1, 3, 4}, rng), random_tensor({1, 1, 3, 4}, rng), AppendPhase::window);
  c.reserve(8);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{3}, {1});
  step.lengths = Tensor::from_vector(std::vector<int32_t>{4}, {1});
  step.span = c.capacity() + 1;
  EXPECT_THROW(c.attach_step(&step), Error);  // span beyond the reserved storage
  step.span = 8;
  c.attach_step(&step);
  EXPECT_THROW(c.append(random_tensor({1, 1, 2, 4}, rng), random_tensor({1, 1, 2, 4}, rng), AppendPhase::window), Error);
  EXPECT_THROW(c.trim(1), Error);
  EXPECT_THROW(c.advance(c.capacity()), Error);
  c.attach_step(nullptr);
  EXPECT_EQ(c.trim(1), 1);
}

}  // namespace
}  // namespace tern
