// AffineRowCodec::decode (vectorised for 8- and 4-bit codes) against a naive decode of the same row:
// codes unpacked bit by bit from the little-endian stream, the f16 scale and bias read back, and
// fma(code, scale, bias) per element -- identical bits for every width, group size and dim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/base/half.h"
#include "tern/ops/affine_codec.h"

namespace tern {
namespace {

std::vector<float> naive_decode(const std::vector<uint8_t>& row, int bits, int64_t group, int64_t dim) {
  const int64_t code_bytes = (dim * bits + 7) / 8;
  std::vector<float> x(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) {
    int code = 0;
    for (int b = 0; b < bits; ++b) {
      const int64_t bit = i * bits + b;
      code |= ((row[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1) << b;
    }
    const int64_t g = i / group;
    uint16_t s, o;
    std::memcpy(&s, row.data() + code_bytes + 2 * g, 2);
    std::memcpy(&o, row.data() + code_bytes + 2 * (dim / group) + 2 * g, 2);
    x[static_cast<size_t>(i)] = std::fma(static_cast<float>(code), f16::to_f32(s), f16::to_f32(o));
  }
  return x;
}

TEST(AffineRowCodec, DecodeMatchesANaiveDecodeBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 2.0f);
  for (int bits : {8, 4, 3, 2}) {
    for (int64_t group : {32, 64, 128}) {
      for (int64_t dim : {128, 256}) {
        const AffineRowCodec c{bits, group, dim};
        std::vector<float> x(static_cast<size_t>(dim)), got(static_cast<size_t>(dim));
        for (float& v : x) v = n(rng);
        std::vector<uint8_t> row(static_cast<size_t>(c.row_bytes()));
        c.encode(x.data(), row.data());
        c.decode(row.data(), got.data());
        const std::vector<float> want = naive_decode(row, bits, group, dim);
        for (int64_t i = 0; i < dim; ++i)
          ASSERT_EQ(want[static_cast<size_t>(i)], got[static_cast<size_t>(i)])
              << "bits " << bits << " group " << group << " dim " << dim << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tern
