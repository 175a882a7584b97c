// The f32 inner kernels of CPU attention (AVX2 where available): one query row's scores over a block
// of key rows, the exp shift of the online softmax, the probability-weighted sum of value rows, one
// online-softmax block built from them, and the merge of key-split partials.
// Shared by sdpa (attention.cpp) and the decode attention over packed KV rows (kv_quant.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tern::cpu::detail {

#if defined(__AVX2__) && defined(__FMA__)
// e^x for x <= 0 (Cephes polynomial, ~1 ulp); x below -87.3 (and -inf) gives exactly 0.
inline __m256 exp_neg(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365f);
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_max_ps(x, lo);
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [hsum(a[0]), ..., hsum(a[7])] in one vector.
inline __m256 hsum8(const __m256* a) {
  __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}
#endif

// s[j] = q . k[j] for n keys (rows of k at stride ldk), head dim d.
inline void scores(const float* q, const float* k, int64_t ldk, int64_t n, int64_t d, float* s) {
  int64_t j = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const int64_t d8 = d & ~int64_t{7};
  for (; j + 8 <= n; j += 8) {
    __m256 acc[8];
    for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
    for (int64_t c = 0; c < d8; c += 8) {
      const __m256 qv = _mm256_loadu_ps(q + c);
      for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + (j + u) * ldk + c), acc[u]);
    }
    _mm256_storeu_ps(s + j, hsum8(acc));
    for (int64_t c = d8; c < d; ++c) {
      for (int u = 0; u < 8; ++u) s[j + u] += q[c] * k[(j + u) * ldk + c];
    }
  }
  for (; j < n; ++j) {
    const float* kj = k + j * ldk;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t c = 0; c < d8; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(kj + c), acc);
    float t = hsum(acc);
    for (int64_t c = d8; c < d; ++c) t += q[c] * kj[c];
    s[j] = t;
  }
#else
  for (; j < n; ++j) {
    float t = 0.0f;
    for (int64_t c = 0; c < d; ++c) t += q[c] * k[j * ldk + c];
    s[j] = t;
  }
#endif
}

// p[j] = exp(s[j] - m) in place; returns the sum.
inline float exp_shift(float* s, int64_t n, float m) {
  int64_t j = 0;
  float sum = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 mv = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  for (; j + 8 <= n; j += 8) {
    const __m256 p = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, p);
    acc = _mm256_add_ps(acc, p);
  }
  sum = hsum(acc);
#endif
  for (; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  return sum;
}

// acc[0, dv) += sum_j p[j] * v[j] (rows of v at stride ldv).
inline void accumulate_values(const float* p, const float* v, int64_t ldv, int64_t n, int64_t dv, float* acc) {
  int64_t c = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; c + 64 <= dv; c += 64) {
    __m256 a[8];
    for (int u = 0; u < 8; ++u) a[u] = _mm256_loadu_ps(acc + c + 8 * u);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = v + j * ldv + c;
      for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * u), a[u]);
    }
    for (int u = 0; u < 8; ++u) _mm256_storeu_ps(acc + c + 8 * u, a[u]);
  }
  for (; c + 8 <= dv; c += 8) {
    __m256 a = _mm256_loadu_ps(acc + c);
    for (int64_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * ldv + c), a);
    _mm256_storeu_ps(acc + c, a);
  }
#endif
  for (; c < dv; ++c) {
    float a = acc[c];
    for (int64_t j = 0; j < n; ++j) a += p[j] * v[j * ldv + c];
    acc[c] = a;
  }
}


// s[j] = softcap * tanh(s[j] / softcap) (softcap > 0).
inline void apply_softcap(float* s, int64_t n, float softcap) {
  const float inv = 1.0f / softcap;
  for (int64_t j = 0; j < n; ++j) s[j] = softcap * std::tanh(s[j] * inv);
}

// One block of the online softmax for one query row: n scores s (consumed), the running max m and
// sum l, and acc[0, dv) += exp(s - m) v over the block's value rows (stride ldv), rescaled when the
// max grows. A block whose scores are all -inf changes nothing.
inline void online_softmax_block(float* s, int64_t n, const float* v, int64_t ldv, int64_t dv, float& m, float& l,
                                 float* acc) {
  float bmax = -INFINITY;
  for (int64_t j = 0; j < n; ++j) bmax = std::max(bmax, s[j]);
  if (bmax == -INFINITY) return;
  const float m_new = std::max(m, bmax);
  if (m_new > m && l > 0.0f) {
    const float corr = std::exp(m - m_new);
    l *= corr;
    for (int64_t c = 0; c < dv; ++c) acc[c] *= corr;
  }
  m = m_new;
  l += exp_shift(s, n, m_new);
  accumulate_values(s, v, ldv, n, dv, acc);
}

// Merges key-split partials (m, l, acc[dv]) of one row, at(sp) for split sp, into acc; returns the
// merged sum (0 when no split saw a key).
template <typename At>
float merge_splits(int64_t splits, int64_t dv, At at, float* acc) {
  float m = -INFINITY;
  for (int64_t sp = 0; sp < splits; ++sp) m = std::max(m, at(sp)[0]);
  std::fill(acc, acc + dv, 0.0f);
  float l = 0.0f;
  for (int64_t sp = 0; sp < splits && m != -INFINITY; ++sp) {
    const float* src = at(sp);
    if (src[1] == 0.0f) continue;
    const float w = std::exp(src[0] - m);
    l += src[1] * w;
    for (int64_t c = 0; c < dv; ++c) acc[c] += src[2 + c] * w;
  }
  return l;
}

}  // namespace tern::cpu::detail
