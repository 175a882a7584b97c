// AffineRowCodec: per-group min/max, f16 scale and bias, codes chosen against the stored f16 values.
#include "tern/ops/affine_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tern/base/half.h"
#include "tern/ops/bit_pack.h"

namespace tern {
namespace {
uint16_t load_u16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
}  // namespace

int64_t AffineRowCodec::row_bytes(int bits, int64_t group, int64_t dim) {
  return packed_bytes(dim, bits) + 2 * (dim / group) * static_cast<int64_t>(sizeof(uint16_t));
}

void AffineRowCodec::encode(const float* x, uint8_t* out) const {
  const int64_t groups = dim / group;
  const float qmax = static_cast<float>((1 << bits) - 1);
  uint8_t codes[1024];
  uint8_t* scales = out + packed_bytes(dim, bits);  // f16 [groups], then biases f16 [groups]
  uint8_t* biases = scales + 2 * groups;
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * group;
    float lo = xg[0], hi = xg[0];
    for (int64_t i = 1; i < group; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    // Codes are chosen against the stored (f16-rounded) scale and bias so decode sees what encode meant.
    const f16 scale_h(std::max(hi - lo, 1e-8f) / qmax), bias_h(lo);
    const float scale = scale_h, bias = bias_h;
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (int64_t i = 0; i < group; ++i) {
      const float q = std::nearbyint((xg[i] - bias) * inv);
      codes[g * group + i] = static_cast<uint8_t>(std::clamp(q, 0.0f, qmax));
    }
    store_u16(scales + 2 * g, scale_h.bits);
    store_u16(biases + 2 * g, bias_h.bits);
  }
  pack_bits(codes, dim, bits, out);
}

void AffineRowCodec::decode(const uint8_t* in, float* x) const {
  const int64_t groups = dim / group;
  const uint8_t* scales = in + packed_bytes(dim, bits);
  const uint8_t* biases = scales + 2 * groups;
#if defined(__AVX2__)
  // 8- and 4-bit codes, 8 at a time: bytes widened, or one 32-bit word shifted per element; the same
  // fused multiply-add as the scalar loop, so both give the same bits.
  if ((bits == 8 || bits == 4) && group % 8 == 0) {
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), mask = _mm256_set1_epi32(15);
    for (int64_t g = 0; g < groups; ++g) {
      const __m256 sv = _mm256_set1_ps(f16::to_f32(load_u16(scales + 2 * g)));
      const __m256 bv = _mm256_set1_ps(f16::to_f32(load_u16(biases + 2 * g)));
      for (int64_t e = g * group; e < (g + 1) * group; e += 8) {
        __m256i c;
        if (bits == 8) {
          c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + e)));
        } else {
          uint32_t w;
          std::memcpy(&w, in + e / 2, 4);
          c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), shifts), mask);
        }
        _mm256_storeu_ps(x + e, _mm256_fmadd_ps(_mm256_cvtepi32_ps(c), sv, bv));
      }
    }
    return;
  }
#endif
  uint8_t codes[1024];
  unpack_bits(in, dim, bits, codes);
  for (int64_t g = 0; g < groups; ++g) {
    const float scale = f16::to_f32(load_u16(scales + 2 * g)), bias = f16::to_f32(load_u16(biases + 2 * g));
    for (int64_t i = 0; i < group; ++i)
      x[g * group + i] = std::fma(static_cast<float>(codes[g * group + i]), scale, bias);
  }
}

}  // namespace tern
