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

// append_norm_rope under a step leaves the norm, the rotation and the write to its read
// (step_read_norm_rope): through attend, rows at their own positions get what an ordinary cache holding
// only that row's keys gives, and the storage ends up with the same rotated keys and values.
TEST(PlainKVCacheStep, NormRopeReadOfRowsAtTheirOwnPositions) {
  std::mt19937 rng(5);
  const int64_t B = 2, H = 2, Hq = 4, D = 8, P = 6;
  const int32_t pos[B] = {P, P - 2};  // row 1 is two keys shorter: its later slots are stale storage
  ops::RopeConfig rc;
  rc.head_dim = D;
  const ops::RopeTable rope = ops::rope_table(rc);
  const QKNormRope n{random_tensor({D}, rng), random_tensor({D}, rng), 1e-6f, &rope};
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  PlainKVCache stepped;
  stepped.append(k0, v0, AppendPhase::window);
  stepped.reserve(P + 4);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{pos[0], pos[1]}, {B});
  step.lengths = Tensor::from_vector(std::vector<int32_t>{pos[0] + 1, pos[1] + 1}, {B});
  step.span = P + 2;
  stepped.attach_step(&step);
  Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
  KVCache::RopedRead r = stepped.append_norm_rope(q, k, v, n, AppendPhase::decode);
  const Tensor got = r.read->attend(r.q, 0.35f);
  stepped.advance(1);  // keys() then shows slot P of row 0 and slot P - 2 of row 1
  stepped.attach_step(nullptr);
  for (int64_t b = 0; b < B; ++b) {
    PlainKVCache ordinary;
    auto row = [&](const Tensor& t, int64_t len) { return t.slice(0, b, b + 1).slice(2, 0, len).contiguous(); };
    ordinary.append(row(k0, pos[b]), row(v0, pos[b]), AppendPhase::window);
    KVCache::RopedRead o = ordinary.append_norm_rope(row(q, 1), row(k, 1), row(v, 1), n, AppendPhase::decode);
    const Tensor want = o.read->attend(o.q, 0.35f);
    EXPECT_LT(max_abs_diff(got.slice(0, b, b + 1).contiguous(), want), 1e-6f) << "row " << b;
    const Tensor stored_k = stepped.keys().slice(0, b, b + 1).slice(2, 0, pos[b] + 1).contiguous();
    const Tensor stored_v = stepped.values().slice(0, b, b + 1).slice(2, 0, pos[b] + 1).contiguous();
    EXPECT_EQ(max_abs_diff(stored_k, ordinary.keys()), 0.0f) << "row " << b;
    EXPECT_EQ(max_abs_diff(stored_v, ordinary.values()), 0.0f) << "row " << b;
  }
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
