// Bit packing of small unsigned codes for quantized KV rows: little-endian, code i occupies bits
// [i*bits, i*bits + bits) of the byte stream (bit 0 = least significant bit of byte 0).
#pragma once
#include <cstdint>

namespace tern {

// Bytes that n codes of `bits` bits take (the last byte zero-padded).
int64_t packed_bytes(int64_t n, int bits);
// codes[0..n) (each < 2^bits, higher bits ignored) -> out[0..packed_bytes(n, bits)). bits in [1, 8].
void pack_bits(const uint8_t* codes, int64_t n, int bits, uint8_t* out);
// The inverse of pack_bits: in[0..packed_bytes(n, bits)) -> codes[0..n).
void unpack_bits(const uint8_t* in, int64_t n, int bits, uint8_t* codes);

}  // namespace tern
