// RecurrentCache: the contract answers (signature, not trimmable, no rope positions), lazy zero state,
// rollback by snapshot (snapshot -> append -> restore -> append equals the second append alone), and the
// offset bookkeeping under a compiled decode step.
#include "tern/state/recurrent_cache.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tern/ops/delta.h"
#include "tern/ops/elementwise.h"

namespace tern {
namespace {

constexpr RecurrentShape kShape{.conv_dim = 6, .conv_kernel = 4, .n_v_head = 2, .d_k = 3, .d_v = 3};

Tensor ramp(const Shape& shape, float start) {
  Tensor t = Tensor::empty(shape, Dtype::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::sin(start + 0.37f * static_cast<float>(i));
  return t;
}

// One append of L tokens: the conv history and the delta-rule state advance together.
void append(RecurrentCache& c, float seed, int64_t L) {
  const int64_t B = 1;
  ops::causal_conv1d(ramp({B, L, kShape.conv_dim}, seed), ramp({kShape.conv_dim, kShape.conv_kernel}, 1.0f),
                     c.conv_state(B));
  Tensor qk = ops::l2norm(ramp({B, L, 1, kShape.d_k}, seed + 2), 1e-6f);
  Tensor g = ops::scale(ops::unary(ramp({B, L, kShape.n_v_head}, seed + 3), ops::UnaryOp::abs), -1.0f);
  ops::gated_delta_rule(qk, qk, ramp({B, L, kShape.n_v_head, kShape.d_v}, seed + 4), g,
                        ops::sigmoid(ramp({B, L, kShape.n_v_head}, seed + 5)), c.recurrent_state(B),
                        ops::DeltaRuleAlgo::chunked);
  c.advance(L);
}

TEST(RecurrentCache, ContractAnswers) {
  RecurrentCache c(kShape);
  EXPECT_EQ(c.signature(), "recurrent:f32");
  EXPECT_FALSE(c.is_trimmable());
  EXPECT_THROW(c.trim(1), Error);
  EXPECT_THROW(c.rope_positions(Tensor::zeros({1, 1, 1, 4}, Dtype::f32), ops::RopeTable{{1.0f, 0.5f}, 1.0f, 4}), Error);
  EXPECT_EQ(c.offset(), 0);
  EXPECT_EQ(c.bytes(), 0);
  EXPECT_EQ(c.conv_state(2).shape(), (Shape{2, 3, 6}));
  EXPECT_EQ(c.recurrent_state(2).shape(), (Shape{2, 2, 3, 3}));
  for (float v : c.recurrent_state(2).to_f32_vector()) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(c.bytes(), (2 * 3 * 6 + 2 * 2 * 3 * 3) * 4);
  EXPECT_THROW(c.conv_state(3), Error);  // the batch is fixed once allocated
  EXPECT_THROW(RecurrentCache(RecurrentShape{}), Error);
}

// Under a step the layer's appended() records nothing (a replayed graph runs no host code) and the
// decoder's advance() does; reserve() needs the state a first forward allocates.
TEST(RecurrentCache, CompiledStepCountsThroughAdvanceOnly) {
  RecurrentCache c(kShape);
  EXPECT_TRUE(c.supports_device_step());
  EXPECT_THROW(c.reserve(10), Error);
  append(c, 0.1f, 5);
  c.appended(5);
  EXPECT_EQ(c.offset(), 10);
  c.reserve(20);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{10}, {1});
  step.lengths = Tensor::from_vector(std::vector<int32_t>{11}, {1});
  c.attach_step(&step);
  c.appended(1);
  EXPECT_EQ(c.offset(), 10);
  EXPECT_THROW(c.spec_round_begin(), Error);
  c.advance(1);
  c.attach_step(nullptr);
  EXPECT_EQ(c.offset(), 11);
  c.appended(2);
  EXPECT_EQ(c.offset(), 13);
}

TEST(RecurrentCache, SnapshotRestoreReplays) {
  RecurrentCache a(kShape), b(kShape);
  append(a, 0.1f, 5);
  append(b, 0.1f, 5);
  RecurrentCache::Snapshot snap = a.snapshot();
  append(a, 0.9f, 3);  // a speculative append, rolled back
  EXPECT_EQ(a.offset(), 8);
  EXPECT_NE(a.recurrent_state(1).to_f32_vector(), b.recurrent_state(1).to_f32_vector());
  a.restore(snap);
  EXPECT_EQ(a.offset(), 5);
  append(a, 0.4f, 2);
  append(b, 0.4f, 2);
  EXPECT_EQ(a.offset(), b.offset());
  EXPECT_EQ(a.conv_state(1).to_f32_vector(), b.conv_state(1).to_f32_vector());
  EXPECT_EQ(a.recurrent_state(1).to_f32_vector(), b.recurrent_state(1).to_f32_vector());
  // The snapshot is a copy: restoring it again still gives the pre-speculation state.
  a.restore(snap);
  RecurrentCache c(kShape);
  append(c, 0.1f, 5);
  EXPECT_EQ(a.recurrent_state(1).to_f32_vector(), c.recurrent_state(1).to_f32_vector());
}

TEST(RecurrentCache, SnapshotOfAnEmptyCache) {
  RecurrentCache a(kShape), fresh(kShape);
  RecurrentCache::Snapshot snap = a.snapshot();
  append(a, 0.2f, 4);
  a.restore(snap);
  EXPECT_EQ(a.offset(), 0);
  EXPECT_EQ(a.bytes(), 0);
  append(a, 0.3f, 2);
  append(fresh, 0.3f, 2);
  EXPECT_EQ(a.recurrent_state(1).to_f32_vector(), fresh.recurrent_state(1).to_f32_vector());
}

}  // namespace
}  // namespace tern
