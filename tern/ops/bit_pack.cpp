// pack_bits / unpack_bits: byte-aligned fast paths for 8 and 4 bits, a bit-stream loop otherwise.
#include "tern/ops/bit_pack.h"

#include <cstring>

#include "tern/base/error.h"

namespace tern {

int64_t packed_bytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

void pack_bits(const uint8_t* codes, int64_t n, int bits, uint8_t* out) {
  TERN_CHECK(bits >= 1 && bits <= 8, "[bit-pack] expected 1..8 bits, got {}", bits);
  const uint32_t mask = (1u << bits) - 1u;
  if (bits == 8) {
    std::memcpy(out, codes, static_cast<size_t>(n));
    return;
  }
  std::memset(out, 0, static_cast<size_t>(packed_bytes(n, bits)));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t c = codes[i] & mask;
    const int64_t bit = i * bits;
    const int64_t byte = bit >> 3;
    const int shift = static_cast<int>(bit & 7);
    out[byte] |= static_cast<uint8_t>(c << shift);
    if (shift + bits > 8) out[byte + 1] |= static_cast<uint8_t>(c >> (8 - shift));
  }
}

void unpack_bits(const uint8_t* in, int64_t n, int bits, uint8_t* codes) {
  TERN_CHECK(bits >= 1 && bits <= 8, "[bit-pack] expected 1..8 bits, got {}", bits);
  const uint32_t mask = (1u << bits) - 1u;
  if (bits == 8) {
    std::memcpy(codes, in, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bit = i * bits;
    const int64_t byte = bit >> 3;
    const int shift = static_cast<int>(bit & 7);
    uint32_t v = static_cast<uint32_t>(in[byte]) >> shift;
    if (shift + bits > 8) v |= static_cast<uint32_t>(in[byte + 1]) << (8 - shift);
    codes[i] = static_cast<uint8_t>(v & mask);
  }
}

}  // namespace tern
