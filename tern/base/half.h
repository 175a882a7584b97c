// Host-side bf16 and f16 storage types (GCC 12 has no std::bfloat16_t): bit containers with
// round-to-nearest-even conversion from f32 and exact widening to f32.
#pragma once
#include <cstdint>
#include <cstring>

namespace tern {

inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_f32(f)) {}
  static bf16 from_bits(uint16_t b) { bf16 h; h.bits = b; return h; }
  operator float() const { return bits_to_f32(static_cast<uint32_t>(bits) << 16); }
  // Round to nearest even; NaN stays NaN (quiet).
  static uint16_t from_f32(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

inline float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(from_f32(f)) {}
  static f16 from_bits(uint16_t b) { f16 h; h.bits = b; return h; }
  operator float() const { return to_f32(bits); }

  static float to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
      if (man == 0) return bits_to_f32(sign);
      // subnormal: value = man * 2^-24
      float v = static_cast<float>(man) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (man << 13));
    return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
  }

  // Round to nearest even, overflow to inf, underflow through subnormals.
  static uint16_t from_f32(float f) {
    uint32_t u = f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (a < 0x38800000u) {  // below the smallest normal (2^-14): subnormal or zero
      if (a < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to zero
      uint32_t exp = a >> 23;
      uint32_t man = (a & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - exp;  // so that result = man >> (shift - 13 + ...)
      // value = man * 2^(exp-150); subnormal unit 2^-24 => q = man * 2^(exp-126)
      uint32_t rshift = shift;  // 126 - exp in [14, 24]
      uint32_t q = man >> rshift;
      uint32_t rem = man & ((1u << rshift) - 1);
      uint32_t half = 1u << (rshift - 1);
      if (rem > half || (rem == half && (q & 1u))) ++q;
      return static_cast<uint16_t>(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
};

}  // namespace tern
