// QuantizedKVCache under a DeviceStep (the compiled-decode path, run here on the CPU): appends encode at
// the step's positions, RoPE takes those positions, the fused read over the step's span with per-row
// lengths equals the ordinary decode read (per row, also when rows sit at different positions), and
// offset() moves only through advance().
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "tern/ops/norm_rope.h"
#include "tern/ops/rope.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/cache_file.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"
#include "tests/state/cache_test_util.h"

namespace tern {
namespace {

using namespace cache_test;

// affine8 (group 32), TurboQuant k8v3 with the decoded read and k8v4 with the deferred (rotated) read.
std::unique_ptr<QuantizedKVCache> make(int which) {
  if (which == 0) return std::make_unique<AffineKVCache>(8, 32);
  if (which == 1) return std::make_unique<TurboQuantKVCache>(8, 3, false);
  return std::make_unique<TurboQuantKVCache>(8, 4, true);
}

Tensor i32(std::vector<int32_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n});
}

class QuantizedKVCacheStep : public ::testing::TestWithParam<int> {};

TEST_P(QuantizedKVCacheStep, DecodeThroughDeviceStepEqualsOrdinaryDecode) {
  std::mt19937 rng(5 + GetParam());
  const int64_t B = 2, H = 2, Hq = 4, D = 64, P = 5, steps = 4;
  std::unique_ptr<QuantizedKVCache> plain = make(GetParam()), stepped = make(GetParam());
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  plain->append(k0, v0, AppendPhase::window);
  stepped->append(k0, v0, AppendPhase::window);
  EXPECT_TRUE(stepped->supports_device_step());
  stepped->reserve(P + steps + 3);
  ASSERT_GE(stepped->capacity(), P + steps + 3);

  DeviceStep step;
  step.positions = i32(std::vector<int32_t>(B, P));
  step.lengths = i32(std::vector<int32_t>(B, P + 1));
  step.span = stepped->capacity();  // a span past the stored prefix: the positions must hide the rest
  stepped->attach_step(&step);
  ops::RopeConfig rc;
  rc.head_dim = D;
  ops::RopeTable rope = ops::rope_table(rc);
  for (int64_t s = 0; s < steps; ++s) {
    Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
    EXPECT_EQ(max_abs_diff(plain->rope_positions(q, rope), stepped->rope_positions(q, rope)), 0.0f);
    Tensor want = plain->append(k, v, AppendPhase::decode)->attend(q, 0.35f);
    // The step's store runs in the read's first attend; a second attend (a Gemma donor read shared by
    // later layers) reads the same.
    std::unique_ptr<AttentionRead> read = stepped->append(k, v, AppendPhase::decode);
    Tensor got = read->attend(q, 0.35f);
    EXPECT_LT(max_abs_diff(want, got), 1e-4f) << stepped->signature() << " step " << s;
    EXPECT_EQ(max_abs_diff(read->attend(q, 0.35f), got), 0.0f) << stepped->signature() << " step " << s;
    EXPECT_EQ(stepped->offset(), P + s) << "append under a step leaves offset() alone";
    stepped->advance(1);
    for (int64_t b = 0; b < B; ++b) {
      step.positions.data<int32_t>()[b] += 1;
      step.lengths.data<int32_t>()[b] += 1;
    }
  }
  stepped->attach_step(nullptr);
  ASSERT_EQ(stepped->offset(), plain->offset());
  // The rows were encoded at the step positions exactly as an ordinary append encodes them.
  EXPECT_EQ(max_abs_diff(stepped->dequantized_keys(), plain->dequantized_keys()), 0.0f);
  EXPECT_EQ(max_abs_diff(stepped->dequantized_values(), plain->dequantized_values()), 0.0f);
  // An ordinary append continues after the advanced offset.
  Tensor k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng), q = random_tensor({B, Hq, 1, D}, rng);
  EXPECT_LT(max_abs_diff(plain->append(k, v, AppendPhase::decode)->attend(q, 0.35f),
                         stepped->append(k, v, AppendPhase::decode)->attend(q, 0.35f)),
            1e-4f);
  // Persistence saves the stored prefix, not the reservation.
  CacheWriter w;
  stepped->save(w);
  for (const CacheEntry& e : w.entries())
    if (e.name == "keys") EXPECT_EQ(static_cast<int64_t>(e.data.size()), stepped->offset() * B * H * stepped->key_codec().row_bytes());
}

// Rows at different positions: row 0 appends at P, row 1 at P - 2 (overwriting its own stored
// position P - 2); each must read exactly what a one-row cache holding its prefix reads.
TEST_P(QuantizedKVCacheStep, RowsAtDifferentPositionsReadTheirOwnPrefix) {
  std::mt19937 rng(11 + GetParam());
  const int64_t B = 2, H = 2, Hq = 4, D = 64, P = 6;
  const int32_t pos[2] = {P, P - 2};
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  std::unique_ptr<QuantizedKVCache> stepped = make(GetParam());
  stepped->append(k0, v0, AppendPhase::window);
  stepped->reserve(P + 4);
  DeviceStep step;
  step.positions = i32({pos[0], pos[1]});
  step.lengths = i32({pos[0] + 1, pos[1] + 1});
  step.span = P + 2;
  stepped->attach_step(&step);
  Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
  Tensor got = stepped->append(k, v, AppendPhase::decode)->attend(q, 0.3f);
  for (int64_t b = 0; b < B; ++b) {
    std::unique_ptr<QuantizedKVCache> one = make(GetParam());
    one->append(k0.narrow(0, b, 1).narrow(2, 0, pos[b]).contiguous(), v0.narrow(0, b, 1).narrow(2, 0, pos[b]).contiguous(),
                AppendPhase::window);
    Tensor want = one->append(k.narrow(0, b, 1).contiguous(), v.narrow(0, b, 1).contiguous(), AppendPhase::decode)
                      ->attend(q.narrow(0, b, 1).contiguous(), 0.3f);
    EXPECT_LT(max_abs_diff(want, got.narrow(0, b, 1).contiguous()), 1e-4f) << stepped->signature() << " row " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, QuantizedKVCacheStep, ::testing::Values(0, 1, 2));

TEST(QuantizedKVCacheStepErrors, ClearErrors) {
  std::mt19937 rng(4);
  AffineKVCache c(8, 32);
  EXPECT_THROW(c.reserve(8), Error);  // no shapes yet
  c.append(random_tensor({1, 1, 3, 32}, rng), random_tensor({1, 1, 3, 32}, rng), AppendPhase::window);
  c.reserve(8);
  EXPECT_EQ(c.offset(), 3);
  DeviceStep step;
  step.positions = i32({3});
  step.lengths = i32({4});
  step.span = c.capacity() + 1;
  EXPECT_THROW(c.attach_step(&step), Error);  // span beyond the reserved storage
  step.span = 8;
  c.attach_step(&step);
  EXPECT_THROW(c.reserve(16), Error);  // the storage must not move while a step is attached
  EXPECT_THROW(c.append(random_tensor({1, 1, 2, 32}, rng), random_tensor({1, 1, 2, 32}, rng), AppendPhase::window), Error);
  EXPECT_THROW(c.trim(1), Error);
  EXPECT_THROW(c.advance(c.capacity()), Error);
  step.positions.data<int32_t>()[0] = static_cast<int32_t>(c.capacity());  // outside the storage
  // The store runs in the read's first attend, which refuses the position by name.
  try {
    c.append(random_tensor({1, 1, 1, 32}, rng), random_tensor({1, 1, 1, 32}, rng), AppendPhase::decode)
        ->attend(random_tensor({1, 2, 1, 32}, rng), 0.25f);
    ADD_FAILURE() << "expected a throw for a position outside the storage";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position"), std::string::npos) << e.what();
  }
  c.attach_step(nullptr);
  EXPECT_EQ(c.trim(1), 1);
  EXPECT_EQ(c.offset(), 2);
}

// Under a step, append_norm_rope through a converted bf16-first cache (whose storage stores the step in
// its read's first attend): the queries it returns, the read and, once it has run, the storage equal
// ops::norm_rope followed by append() on a twin cache, step after step.
TEST_P(QuantizedKVCacheStep, NormRopeAppendStoresThroughItsRead) {
  std::mt19937 rng(9 + GetParam());
  const int64_t B = 2, H = 2, Hq = 4, D = 64, P = 5, steps = 3;
  std::unique_ptr<QuantizedKVCache> twin = make(GetParam());
  TransitionKVCache stepped(0, make(GetParam()));
  Tensor k0 = random_tensor({B, H, P, D}, rng), v0 = random_tensor({B, H, P, D}, rng);
  twin->append(k0, v0, AppendPhase::window);
  stepped.append(k0, v0, AppendPhase::window);
  ASSERT_TRUE(stepped.converted());
  twin->reserve(P + steps);
  stepped.reserve(P + steps);
  DeviceStep step;
  step.positions = i32({P, P});
  step.lengths = i32({P + 1, P + 1});
  step.span = P + steps;
  twin->attach_step(&step);
  stepped.attach_step(&step);
  ops::RopeConfig rc;
  rc.head_dim = D;
  const ops::RopeTable rope = ops::rope_table(rc);
  QKNormRope n;
  n.wq = random_tensor({D}, rng);
  n.wk = random_tensor({D}, rng);
  n.rope = &rope;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
    const ops::NormRoped qk = ops::norm_rope(q, k, n.wq, n.wk, n.eps, twin->next_positions(1), rope);
    const Tensor want = twin->append(qk.k, v, AppendPhase::decode)->attend(qk.q, 0.35f);
    KVCache::RopedRead r = stepped.append_norm_rope(q, k, v, n, AppendPhase::decode);
    EXPECT_EQ(max_abs_diff(r.q, qk.q), 0.0f) << "step " << s;
    EXPECT_EQ(max_abs_diff(r.read->attend(r.q, 0.35f), want), 0.0f) << "step " << s;
    for (int64_t b = 0; b < B; ++b) {
      step.positions.data<int32_t>()[b] += 1;
      step.lengths.data<int32_t>()[b] += 1;
    }
  }
  twin->advance(steps);
  stepped.advance(steps);
  twin->attach_step(nullptr);
  stepped.attach_step(nullptr);
  // The stores landed where append() puts them: an ordinary append then reads the same rows.
  Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
  EXPECT_EQ(max_abs_diff(twin->append(k, v, AppendPhase::decode)->attend(q, 0.35f),
                         stepped.append(k, v, AppendPhase::decode)->attend(q, 0.35f)),
            0.0f);
}

// The bf16-first wrapper offers the step only once it has converted, and then behaves as its storage.
TEST(TransitionKVCacheStep, FollowsTheStepOnceConverted) {
  std::mt19937 rng(31);
  const int64_t B = 1, H = 2, Hq = 4, D = 64;
  TransitionKVCache late(100, make(0)), early(0, make(0));
  std::unique_ptr<QuantizedKVCache> reference = make(0);
  Tensor k0 = random_tensor({B, H, 6, D}, rng), v0 = random_tensor({B, H, 6, D}, rng);
  late.append(k0, v0, AppendPhase::window);
  early.append(k0, v0, AppendPhase::window);
  reference->store(k0, v0);
  EXPECT_FALSE(late.supports_device_step());
  EXPECT_THROW(late.reserve(16), Error);
  ASSERT_TRUE(early.converted());
  ASSERT_TRUE(early.supports_device_step());
  early.reserve(16);
  DeviceStep step;
  step.positions = i32({6});
  step.lengths = i32({7});
  step.span = 16;
  early.attach_step(&step);
  Tensor q = random_tensor({B, Hq, 1, D}, rng), k = random_tensor({B, H, 1, D}, rng), v = random_tensor({B, H, 1, D}, rng);
  Tensor want = reference->append(k, v, AppendPhase::decode)->attend(q, 0.125f);
  Tensor got = early.append(k, v, AppendPhase::decode)->attend(q, 0.125f);
  EXPECT_LT(max_abs_diff(want, got), 1e-5f);
  EXPECT_EQ(early.offset(), 6);
  early.advance(1);
  early.attach_step(nullptr);
  EXPECT_EQ(early.offset(), 7);
}

}  // namespace
}  // namespace tern
