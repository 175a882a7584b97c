// Widening of bf16/f16 rows to f32 for the CPU kernels that compute in f32 over narrower storage
// (matmul's weight blocks, attention's K/V blocks): AVX2/F16C where available, exact in every case.
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

#include "tern/base/half.h"

namespace tern::cpu::detail {

inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_f32(v.bits); }
inline float to_f32(f16 v) { return f16::to_f32(v.bits); }

// dst[i] = float(src[i]) for i in [0, n); src contiguous.
template <typename T>
void widen_row(const T* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  if constexpr (std::is_same_v<T, bf16>) {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
  } else if constexpr (std::is_same_v<T, f16>) {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = to_f32(src[i]);
}

}  // namespace tern::cpu::detail
