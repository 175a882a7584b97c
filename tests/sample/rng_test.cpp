// Rng: Philox4x32-10 known answers, seeded determinism, seek, and uniformity of uniform().
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "tern/sample/rng.h"

namespace tern {
namespace {

// Random123 kat_vectors for philox4x32, 10 rounds: counter, key -> output.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, StreamLayoutIsDocumented) {
  uint64_t seed = 0x0123456789abcdefull;
  Rng rng(seed);
  for (uint64_t block = 0; block < 3; ++block) {
    auto expect = philox4x32_10({static_cast<uint32_t>(block), 0, 0, 0}, {0x89abcdefu, 0x01234567u});
    for (int j = 0; j < 4; ++j) EXPECT_EQ(rng.next_u32(), expect[j]) << "block " << block << " word " << j;
  }
  EXPECT_EQ(rng.position(), 12u);
}

TEST(Rng, SameSeedSameSequenceDifferentSeedDiffers) {
  Rng a(42), b(42), c(43);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    differ += x != c.next_u32();
  }
  EXPECT_GT(differ, 990);
}

TEST(Rng, SeekReplays) {
  Rng a(7);
  std::vector<uint32_t> words;
  for (int i = 0; i < 20; ++i) words.push_back(a.next_u32());
  Rng b(7);
  b.seek(13);
  EXPECT_EQ(b.next_u32(), words[13]);
  b.seek(2);
  EXPECT_EQ(b.next_u32(), words[2]);
  EXPECT_EQ(b.position(), 3u);
}

TEST(Rng, UniformIsIn01With24Bits) {
  Rng rng(1);
  std::set<float> seen;
  for (int i = 0; i < 100000; ++i) {
    float u = rng.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    float scaled = u * 16777216.0f;  // exact multiple of 2^-24
    ASSERT_EQ(scaled, static_cast<float>(static_cast<uint32_t>(scaled)));
    seen.insert(u);
  }
  EXPECT_GT(seen.size(), 99000u);
  Rng same(1);
  EXPECT_EQ(same.uniform(), static_cast<float>(Rng(1).next_u32() >> 8) / 16777216.0f);
}

TEST(Rng, UniformChiSquareTenBins) {
  constexpr int kBins = 10, kDraws = 200000;
  for (uint64_t seed : {0ull, 1ull, 12345ull}) {
    Rng rng(seed);
    std::array<int, kBins> counts{};
    for (int i = 0; i < kDraws; ++i) ++counts[static_cast<int>(rng.uniform() * kBins)];
    double expected = static_cast<double>(kDraws) / kBins, chi2 = 0.0;
    for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
    EXPECT_LT(chi2, 27.88) << "seed " << seed;  // chi-square, 9 dof, p = 0.001
  }
}

}  // namespace
}  // namespace tern
