// RingKVCache contract: growth up to the window, wrap, trim before the wrap and a clear refusal after
// it, the temporal view, and reads equal to a PlainKVCache with the same sliding window.
#include "tern/state/ring_kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tern/state/kv_cache_options.h"
#include "tern/state/plain_kv_cache.h"
#include "tests/state/cache_test_util.h"

namespace tern {
namespace {

using namespace cache_test;

// k [1, 1, n, 2] whose rows are (p, -p) for the absolute positions p = first .. first + n - 1.
Tensor position_keys(int64_t first, int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) {
    v.push_back(static_cast<float>(first + i));
    v.push_back(-static_cast<float>(first + i));
  }
  return Tensor::from_vector(v, {1, 1, n, 2});
}

std::vector<float> first_column(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<float> out;
  for (int64_t i = 0; i < c.size(2); ++i) out.push_back(c.data<float>()[i * c.size(3)]);
  return out;
}

void append_positions(RingKVCache& cache, int64_t n) {
  Tensor k = position_keys(cache.offset(), n);
  cache.append(k, k, n == 1 ? AppendPhase::decode : AppendPhase::window);
}

std::vector<float> iota(int64_t first, int64_t n) {
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<float>(first + i));
  return out;
}

TEST(RingKVCache, SignatureAndGrowthUpToTheWindow) {
  RingKVCache ring(16);
  EXPECT_EQ(ring.signature(), "kv:bf16:ring:16");
  append_positions(ring, 5);
  EXPECT_EQ(ring.signature(), "kv:f32:ring:16");
  EXPECT_EQ(ring.capacity(), 5);
  append_positions(ring, 1);
  EXPECT_GE(ring.capacity(), 6);
  EXPECT_LE(ring.capacity(), 16);
  append_positions(ring, 40);
  EXPECT_EQ(ring.capacity(), 16);
  EXPECT_EQ(ring.offset(), 46);
  EXPECT_EQ(ring.bytes(), 2 * 16 * 2 * static_cast<int64_t>(sizeof(float)));
}

TEST(RingKVCache, WrapKeepsTheLastWindowInTimeOrder) {
  RingKVCache ring(4);
  for (int i = 0; i < 10; ++i) append_positions(ring, 1);
  EXPECT_EQ(ring.offset(), 10);
  EXPECT_EQ(ring.stored(), 4);
  EXPECT_EQ(first_column(ring.temporal_keys()), iota(6, 4));
  EXPECT_EQ(first_column(ring.temporal_values()), iota(6, 4));
  append_positions(ring, 3);  // a window append that wraps across the buffer's end
  EXPECT_EQ(first_column(ring.temporal_keys()), iota(9, 4));
  append_positions(ring, 9);  // longer than the window in one append
  EXPECT_EQ(first_column(ring.temporal_keys()), iota(18, 4));
}

TEST(RingKVCache, TrimBeforeWrap) {
  RingKVCache ring(8);
  append_positions(ring, 6);
  ASSERT_TRUE(ring.is_trimmable());
  EXPECT_EQ(ring.trim(2), 2);
  EXPECT_EQ(ring.offset(), 4);
  append_positions(ring, 3);  // positions 4..6 again
  EXPECT_EQ(first_column(ring.temporal_keys()), iota(0, 7));
  append_positions(ring, 1);  // exactly full: still nothing overwritten
  EXPECT_TRUE(ring.is_trimmable());
  EXPECT_EQ(ring.trim(100), 8);
  EXPECT_EQ(ring.offset(), 0);
}

TEST(RingKVCache, RefusesToTrimAfterWrap) {
  RingKVCache ring(4);
  append_positions(ring, 5);
  EXPECT_FALSE(ring.is_trimmable());
  try {
    ring.trim(1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has wrapped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ring.offset(), 5);
}

TEST(RingKVCache, RejectsANonPositiveWindow) { EXPECT_THROW(RingKVCache(0), Error); }

TEST(RingKVCache, RopePositionsAreAbsolute) {
  RingKVCache ring(4);
  append_positions(ring, 10);
  ops::RopeConfig rc;
  rc.head_dim = 2;
  ops::RopeTable table = ops::rope_table(rc);
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f, 0.0f}, {1, 1, 1, 2});
  Tensor got = ring.rope_positions(x, table).contiguous();
  EXPECT_NEAR(got.data<float>()[0], std::cos(10.0f), 1e-6);
  EXPECT_NEAR(got.data<float>()[1], std::sin(10.0f), 1e-6);
}

TEST(KVCacheFactory, SlidingLayersGetARing) {
  auto sliding = make_kv_cache({}, {.window = 16});
  EXPECT_NE(dynamic_cast<RingKVCache*>(sliding.get()), nullptr);
  auto full = make_kv_cache({}, {.window = 0});
  EXPECT_NE(dynamic_cast<PlainKVCache*>(full.get()), nullptr);
}

// Every chunking gives each query the same keys as a plain cache that stores everything and masks
// with the window, including appends longer than the window.
TEST(RingKVCache, ReadsEqualAPlainWindowedCache) {
  constexpr int64_t kWindow = 16, kTotal = 90, B = 2, Hq = 4, Hkv = 2, D = 8;
  for (int64_t chunk : {1, 5, 16, 17, 40}) {
    std::mt19937 rng(static_cast<uint32_t>(chunk));
    RingKVCache ring(kWindow);
    PlainKVCache plain(kWindow);
    for (int64_t at = 0; at < kTotal; at += chunk) {
      const int64_t n = std::min(chunk, kTotal - at);
      Tensor k = random_tensor({B, Hkv, n, D}, rng), v = random_tensor({B, Hkv, n, D}, rng);
      Tensor q = random_tensor({B, Hq, n, D}, rng);
      AppendPhase phase = n == 1 ? AppendPhase::decode : AppendPhase::window;
      auto ring_read = ring.append(k, v, phase);
      auto plain_read = plain.append(k, v, phase);
      for (float softcap : {0.0f, 5.0f}) {
        Tensor got = ring_read->attend(q, 0.35f, softcap).contiguous();
        Tensor want = plain_read->attend(q, 0.35f, softcap).contiguous();
        ASSERT_EQ(got.shape(), want.shape());
        float d = 0;
        for (int64_t i = 0; i < got.numel(); ++i) d = std::max(d, std::fabs(got.data<float>()[i] - want.data<float>()[i]));
        EXPECT_LE(d, 1e-5f) << "chunk " << chunk << " at " << at << " softcap " << softcap;
      }
      EXPECT_EQ(ring.offset(), plain.offset());
      EXPECT_EQ(ring.stored(), std::min(plain.offset(), kWindow));
    }
    // The temporal view is the plain cache's last `window` positions.
    Tensor want = plain.keys().slice(2, kTotal - kWindow, kTotal).contiguous();
    Tensor got = ring.temporal_keys().contiguous();
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace tern
