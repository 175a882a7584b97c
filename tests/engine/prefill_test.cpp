// Prefill in bounded forwards (tern/engine/prefill.h): the chunk sizes a budget gives, and a chunked
// prefill of a batch leaving the caches where one forward leaves them, for every fixture architecture
// (Gemma 4's ring of 16 positions wraps across the chunks, Qwen3.5's recurrent state carries over them).
#include "tern/engine/prefill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tern/models/registry.h"

namespace tern {
namespace {

TEST(Prefill, PositionsAForwardFollowTheBudget) {
  EXPECT_EQ(prefill_positions(1, 100, 0), 100);        // 0: no limit
  EXPECT_EQ(prefill_positions(1, 100, 8192), 100);     // under the budget: one forward
  EXPECT_EQ(prefill_positions(1, 32768, 8192), 8192);
  EXPECT_EQ(prefill_positions(8, 32768, 8192), 1024);  // rows share the budget
  EXPECT_EQ(prefill_positions(3, 10, 7), 2);           // rounded down
  EXPECT_EQ(prefill_positions(16, 5, 8), 1);           // a budget below the rows still makes progress
  EXPECT_THROW(prefill_positions(0, 5, 8), Error);
  EXPECT_THROW(prefill_positions(2, 0, 8), Error);
}

TEST(Prefill, RejectsIdsThatAreNotABatchOfRows) {
  auto model = load_model(std::string(TERN_TEST_DATA) + "/models/qwen3");
  CacheList caches = model->make_caches();
  EXPECT_THROW(prefill(*model, Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3}), caches, 0), Error);
  EXPECT_THROW(prefill(*model, Tensor::zeros({1, 3}, Dtype::f32), caches, 0), Error);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  EXPECT_EQ(x.shape(), y.shape());
  float m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::fabs(x.data<float>()[i] - y.data<float>()[i]));
  return m;
}

class ChunkedPrefill : public ::testing::TestWithParam<std::string> {};

TEST_P(ChunkedPrefill, EqualsOneForwardAndTheCachesContinueAlike) {
  auto model = load_model(std::string(TERN_TEST_DATA) + "/models/" + GetParam());
  const int64_t B = 2, P = 37, V = model->vocab_size();
  std::mt19937 rng(7);
  std::vector<int32_t> v(B * P);
  for (auto& x : v) x = static_cast<int32_t>(rng() % V);
  const Tensor ids = Tensor::from_vector(v, {B, P});
  CacheList whole = model->make_caches(), chunked = model->make_caches();
  const Tensor a = prefill(*model, ids, whole, 0);
  const Tensor b = prefill(*model, ids, chunked, B * 7);  // 7 positions a forward: 6 chunks, the last of 2
  ASSERT_EQ(a.shape(), (Shape{B, 1, V}));
  EXPECT_LT(max_abs_diff(a, b), 2e-4f);
  // One decode step after each: the chunked caches hold the same prefix.
  const Tensor next = Tensor::from_vector(std::vector<int32_t>{5, 9}, {B, 1});
  EXPECT_LT(max_abs_diff(model->forward(next, whole, false), model->forward(next, chunked, false)), 2e-4f);
}

// With --kv-start S a chunk also ends at S: the chunked prefill is the forward of the first S positions,
// then the rest cut at the budget's multiples, bit for bit.
TEST(Prefill, ChunksEndWhereTheBf16FirstTransitionFalls) {
  auto model = load_model(std::string(TERN_TEST_DATA) + "/models/qwen3");
  KVCacheOptions kv;
  kv.kind = "affine8";
  kv.group = 32;
  kv.start = 10;
  const int64_t P = 37, V = model->vocab_size();
  std::vector<int32_t> v(P);
  for (int64_t i = 0; i < P; ++i) v[i] = static_cast<int32_t>((i * 7919 + 3) % V);
  const Tensor ids = Tensor::from_vector(v, {1, P});
  CacheList chunked = model->make_caches(kv), by_hand = model->make_caches(kv);
  const Tensor a = prefill(*model, ids, chunked, 16);  // 10, then up to 16 and 32, then 5
  model->forward(ids.narrow(1, 0, 10).contiguous(), by_hand, false);
  model->forward(ids.narrow(1, 10, 6).contiguous(), by_hand, false);
  model->forward(ids.narrow(1, 16, 16).contiguous(), by_hand, false);
  const Tensor b = model->forward(ids.narrow(1, 32, 5).contiguous(), by_hand, false);
  EXPECT_EQ(max_abs_diff(a, b), 0.0f);
  // Without the cut the first chunk would be read unquantized up to position 16: other numbers.
  CacheList uncut = model->make_caches(kv);
  model->forward(ids.narrow(1, 0, 16).contiguous(), uncut, false);
  model->forward(ids.narrow(1, 16, 16).contiguous(), uncut, false);
  EXPECT_GT(max_abs_diff(a, model->forward(ids.narrow(1, 32, 5).contiguous(), uncut, false)), 0.0f);
  // S one past a chunk: the cache holds S - 1 positions after the first chunk, and the next is one long.
  kv.start = 17;
  CacheList past = model->make_caches(kv), past_by_hand = model->make_caches(kv);
  const Tensor d = prefill(*model, ids, past, 16);  // 16, 1, then up to 32, then 5
  model->forward(ids.narrow(1, 0, 16).contiguous(), past_by_hand, false);
  model->forward(ids.narrow(1, 16, 1).contiguous(), past_by_hand, false);
  model->forward(ids.narrow(1, 17, 15).contiguous(), past_by_hand, false);
  EXPECT_EQ(max_abs_diff(d, model->forward(ids.narrow(1, 32, 5).contiguous(), past_by_hand, false)), 0.0f);
  // A budget of 0 is one forward: no cut, the whole prompt read unquantized before the transition.
  CacheList one = model->make_caches(kv), one_by_hand = model->make_caches(kv);
  EXPECT_EQ(max_abs_diff(prefill(*model, ids, one, 0), model->forward(ids, one_by_hand, false)), 0.0f);
  // S = 1: exactly one position read unquantized, then the budget's cuts.
  kv.start = 1;
  CacheList first = model->make_caches(kv), first_by_hand = model->make_caches(kv);
  const Tensor e = prefill(*model, ids, first, 16);  // 1, then up to 16 and 32, then 5
  model->forward(ids.narrow(1, 0, 1).contiguous(), first_by_hand, false);
  model->forward(ids.narrow(1, 1, 15).contiguous(), first_by_hand, false);
  model->forward(ids.narrow(1, 16, 16).contiguous(), first_by_hand, false);
  EXPECT_EQ(max_abs_diff(e, model->forward(ids.narrow(1, 32, 5).contiguous(), first_by_hand, false)), 0.0f);
  // S = 0 converts after the first append whatever its length: no one-position first chunk.
  kv.start = 0;
  CacheList zero = model->make_caches(kv), zero_by_hand = model->make_caches(kv);
  const Tensor c = prefill(*model, ids, zero, 16);
  model->forward(ids.narrow(1, 0, 16).contiguous(), zero_by_hand, false);
  model->forward(ids.narrow(1, 16, 16).contiguous(), zero_by_hand, false);
  EXPECT_EQ(max_abs_diff(c, model->forward(ids.narrow(1, 32, 5).contiguous(), zero_by_hand, false)), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChunkedPrefill,
                         ::testing::Values("qwen3", "llama", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "gemma4",
                                           "gemma4_moe"));

}  // namespace
}  // namespace tern
