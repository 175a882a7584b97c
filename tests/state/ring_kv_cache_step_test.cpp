// RingKVCache under a DeviceStep (the compiled-decode path, run here on the CPU): appends land at slot
// position % window, RoPE takes the step's positions, the order-free read over every slot held equals
// the ordinary decode read (before and after the ring wraps), and offset() moves only through advance().
#include <gtest/gtest.h>

#include <random>

#include "tern/ops/rope.h"
#include "tern/state/ring_kv_cache.h"
#include "tests/state/cache_test_util.h"

namespace tern {
namespace {

using namespace cache_test;

// Prefill P positions into a ring of `window`, then `steps` decode appends through a DeviceStep that
// reserves `reserve` positions, each read against an ordinary ring's.
void expect_step_equals_ordinary(int64_t window, int64_t P, int64_t steps, int64_t reserve) {
  SCOPED_TRACE("window " + std::to_string(window) + " prefill " + std::to_string(P));
  std::mt19937 rng(static_cast<uint32_t>(window * 100 + P));
  const int64_t B = 2, H = 2, Hq = 4, D = 8;
  RingKVCache plain(window), stepped(window);
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  plain.append(k0, v0, AppendPhase::window);
  stepped.append(k0, v0, AppendPhase::window);
  stepped.reserve(reserve);
  EXPECT_GE(stepped.capacity(), std::min(window, reserve));
  EXPECT_LE(stepped.capacity(), window);

  // span 1, the decoder's bucket: a ring reads its own slots whatever it says
  expect_step_decodes_equal(plain, stepped, P, steps, 1, Hq, rng);
  EXPECT_EQ(stepped.offset(), plain.offset());
  EXPECT_EQ(max_abs_diff(stepped.temporal_keys(), plain.temporal_keys()), 0.0f);
  EXPECT_EQ(max_abs_diff(stepped.temporal_values(), plain.temporal_values()), 0.0f);
  // Detached, it decodes on as an ordinary ring.
  Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
  EXPECT_LT(max_abs_diff(plain.append(k, v, AppendPhase::decode)->attend(q, 0.35f),
                         stepped.append(k, v, AppendPhase::decode)->attend(q, 0.35f)),
            1e-6f);
}

TEST(RingKVCacheStep, DecodeThroughDeviceStepEqualsOrdinaryDecode) {
  expect_step_equals_ordinary(8, 3, 12, 40);  // grows to the window at reserve(), wraps during the steps
  expect_step_equals_ordinary(8, 13, 9, 40);  // wrapped by the prefill already
  expect_step_equals_ordinary(16, 5, 6, 12);  // never reaches the window: 12 slots
}

TEST(RingKVCacheStep, ClearErrors) {
  std::mt19937 rng(4);
  RingKVCache ring(4);
  EXPECT_TRUE(ring.supports_device_step());
  EXPECT_THROW(ring.reserve(8), Error);  // no shapes yet
  ring.append(random_tensor({1, 1, 3, 4}, rng), random_tensor({1, 1, 3, 4}, rng), AppendPhase::window);
  ring.reserve(8);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{3}, {1});
  step.lengths = Tensor::from_vector(std::vector<int32_t>{4}, {1});
  ring.attach_step(&step);
  EXPECT_THROW(ring.reserve(8), Error);
  EXPECT_THROW(ring.trim(1), Error);
  EXPECT_THROW(ring.append(random_tensor({1, 1, 2, 4}, rng), random_tensor({1, 1, 2, 4}, rng), AppendPhase::window),
               Error);
  EXPECT_THROW(ring.spec_round_begin(), Error);
  ring.attach_step(nullptr);
  EXPECT_EQ(ring.offset(), 3);
}

}  // namespace
}  // namespace tern
