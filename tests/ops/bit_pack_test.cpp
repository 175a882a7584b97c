// pack_bits / unpack_bits: round trips for every width 1..8 and odd lengths, and the documented
// little-endian layout on hand-computed bytes.
#include "tern/ops/bit_pack.h"

#include <gtest/gtest.h>

#include <random>

#include "tern/base/error.h"
#include <vector>

namespace tern {
namespace {

TEST(BitPack, RoundTripsEveryWidthAndOddLengths) {
  std::mt19937 rng(7);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {1, 2, 3, 7, 13, 31, 33, 64, 101}) {
      std::vector<uint8_t> codes(n), back(n);
      for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1u));
      std::vector<uint8_t> packed(packed_bytes(n, bits) + 1, 0xAB);  // a guard byte past the end
      pack_bits(codes.data(), n, bits, packed.data());
      EXPECT_EQ(packed.back(), 0xAB) << "wrote past packed_bytes, bits " << bits << " n " << n;
      unpack_bits(packed.data(), n, bits, back.data());
      EXPECT_EQ(back, codes) << "bits " << bits << " n " << n;
      EXPECT_EQ(packed_bytes(n, bits), (n * bits + 7) / 8);
    }
  }
}

TEST(BitPack, LittleEndianLayout) {
  // 3-bit codes 5 (101) at bits 0..2, 3 (011) at bits 3..5 and 7 (111) at bits 6..8, which
  // straddles into byte 1.
  const uint8_t codes[] = {5, 3, 7};
  uint8_t out[2] = {0, 0};
  pack_bits(codes, 3, 3, out);
  EXPECT_EQ(out[0], 0b11011101);
  EXPECT_EQ(out[1], 0b00000001);
  // 4-bit: two per byte, element 0 in the low nibble.
  const uint8_t nib[] = {0x3, 0xC};
  uint8_t b = 0;
  pack_bits(nib, 2, 4, &b);
  EXPECT_EQ(b, 0xC3);
}

TEST(BitPack, RejectsWidthsOutsideOneToEight) {
  uint8_t c = 0, o = 0;
  EXPECT_THROW(pack_bits(&c, 1, 0, &o), Error);
  EXPECT_THROW(unpack_bits(&o, 1, 9, &c), Error);
}

}  // namespace
}  // namespace tern
