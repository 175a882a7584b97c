// CPU scaled dot-product attention: per (batch, kv head, query block[, key split]) work items, online
// softmax over key blocks in f32, AVX2 score and value kernels. GQA heads sharing a kv head run in one
// item so each key block is read once for all of them; decode splits keys across threads.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tern/base/parallel.h"
#include "tern/backend/cpu/widen.h"
#include "tern/ops/attention.h"

namespace tern::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using detail::to_f32;
using detail::widen_row;

// dst[i] = float(src[i]) * mul (the query row, pre-scaled).
template <typename T>
void widen_row_scaled(const T* src, int64_t n, float* dst, float mul) {
  widen_row(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] *= mul;
}

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
void scores(const float* q, const float* k, int64_t ldk, int64_t n, int64_t d, float* s) {
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
float exp_shift(float* s, int64_t n, float m) {
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
void accumulate_values(const float* p, const float* v, int64_t ldv, int64_t n, int64_t dv, float* acc) {
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

// Everything an item needs, fixed per call.
struct Problem {
  int64_t b, hq, lq, d, hkv, lk, dv, group;
  int64_t qb;      // query positions per item
  int64_t nqb;     // query blocks
  int64_t splits;  // key ranges per (b, kv head, query block)
  int64_t kb;      // keys per block
  float softcap;
  const ops::AttentionMask* mask;
  std::vector<int64_t> kv_len;  // per batch row; Lk when absent
  const float* bias = nullptr;  // broadcast view, strides below
  Strides bias_strides;
  Tensor q, k, v;
  float scale;
};

// Per-thread buffers for one item: reused across items and calls.
struct Workspace {
  std::vector<float> q, acc, m, l, s, kbuf, vbuf;
  std::vector<int64_t> lo, hi;
  void reserve(const Problem& p) {
    const int64_t rows = p.qb * p.group;
    auto grow = [](auto& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    };
    grow(q, rows * p.d);
    grow(acc, rows * p.dv);
    grow(m, rows);
    grow(l, rows);
    grow(lo, rows);
    grow(hi, rows);
    grow(s, p.kb);
    grow(kbuf, p.kb * p.d);
    grow(vbuf, p.kb * p.dv);
  }
};

// One work item: rows (query head hh of the group, query i of the block) over keys of one split. Writes
// normalised output (splits == 1) or the (m, l, acc) partial of each row to `partial`.
template <typename T>
void run_item(const Problem& p, int64_t item, Workspace& ws, T* out, float* partial) {
  const int64_t split = item % p.splits;
  const int64_t qblock = (item / p.splits) % p.nqb;
  const int64_t g = (item / (p.splits * p.nqb)) % p.hkv;
  const int64_t b = item / (p.splits * p.nqb * p.hkv);
  const int64_t i0 = qblock * p.qb, ni = std::min(p.qb, p.lq - i0);
  const int64_t rows = ni * p.group;
  const int64_t chunk = (p.lk + p.splits - 1) / p.splits;
  const int64_t k0 = std::min(p.lk, split * chunk), k1 = std::min(p.lk, k0 + chunk);
  const ops::AttentionMask& mask = *p.mask;

  int64_t ulo = k1, uhi = k0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = g * p.group + r / ni, i = i0 + r % ni;
    const int64_t pos = i + mask.q_offset;
    int64_t lo = k0, hi = std::min(k1, p.kv_len[b]);
    if (mask.causal) hi = std::min(hi, pos + 1);
    if (mask.window > 0) lo = std::max(lo, pos - mask.window + 1);
    ws.lo[r] = lo;
    ws.hi[r] = hi;
    ws.m[r] = kNegInf;
    ws.l[r] = 0.0f;
    std::fill(ws.acc.begin() + r * p.dv, ws.acc.begin() + (r + 1) * p.dv, 0.0f);
    if (lo >= hi) continue;
    ulo = std::min(ulo, lo);
    uhi = std::max(uhi, hi);
    const T* qrow = p.q.data<T>() + b * p.q.stride(0) + h * p.q.stride(1) + i * p.q.stride(2);
    widen_row_scaled(qrow, p.d, ws.q.data() + r * p.d, p.scale);
  }

  constexpr bool kDirect = std::is_same_v<T, float>;
  const T* kbase = p.k.data<T>() + b * p.k.stride(0) + g * p.k.stride(1);
  const T* vbase = p.v.data<T>() + b * p.v.stride(0) + g * p.v.stride(1);
  const int64_t sk = p.k.stride(2), sv = p.v.stride(2);
  float* s = ws.s.data();
  for (int64_t j0 = ulo; j0 < uhi; j0 += p.kb) {
    const int64_t j1 = std::min(uhi, j0 + p.kb);
    const float* kp;
    const float* vp;
    int64_t ldk, ldv;
    if constexpr (kDirect) {
      kp = kbase + j0 * sk, vp = vbase + j0 * sv, ldk = sk, ldv = sv;
    } else {
      for (int64_t j = j0; j < j1; ++j) {
        widen_row(kbase + j * sk, p.d, ws.kbuf.data() + (j - j0) * p.d);
        widen_row(vbase + j * sv, p.dv, ws.vbuf.data() + (j - j0) * p.dv);
      }
      kp = ws.kbuf.data(), vp = ws.vbuf.data(), ldk = p.d, ldv = p.dv;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t a = std::max(ws.lo[r], j0), e = std::min(ws.hi[r], j1);
      if (a >= e) continue;
      const int64_t n = e - a;
      scores(ws.q.data() + r * p.d, kp + (a - j0) * ldk, ldk, n, p.d, s);
      if (p.softcap > 0.0f) {
        const float inv = 1.0f / p.softcap;
        for (int64_t j = 0; j < n; ++j) s[j] = p.softcap * std::tanh(s[j] * inv);
      }
      if (p.bias) {
        const int64_t h = g * p.group + r / ni, i = i0 + r % ni;
        const float* br = p.bias + b * p.bias_strides[0] + h * p.bias_strides[1] + i * p.bias_strides[2];
        const int64_t sj = p.bias_strides[3];
        for (int64_t j = 0; j < n; ++j) s[j] += br[(a + j) * sj];
      }
      float bmax = kNegInf;
      for (int64_t j = 0; j < n; ++j) bmax = std::max(bmax, s[j]);
      if (bmax == kNegInf) continue;
      float* acc = ws.acc.data() + r * p.dv;
      const float m_new = std::max(ws.m[r], bmax);
      if (m_new > ws.m[r] && ws.l[r] > 0.0f) {
        const float corr = std::exp(ws.m[r] - m_new);
        ws.l[r] *= corr;
        for (int64_t c = 0; c < p.dv; ++c) acc[c] *= corr;
      }
      ws.m[r] = m_new;
      ws.l[r] += exp_shift(s, n, m_new);
      accumulate_values(s, vp + (a - j0) * ldv, ldv, n, p.dv, acc);
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = g * p.group + r / ni, i = i0 + r % ni;
    const float* acc = ws.acc.data() + r * p.dv;
    if (p.splits > 1) {
      float* dst = partial + (item * p.qb * p.group + r) * (p.dv + 2);
      dst[0] = ws.m[r];
      dst[1] = ws.l[r];
      std::copy(acc, acc + p.dv, dst + 2);
      continue;
    }
    T* o = out + ((b * p.hq + h) * p.lq + i) * p.dv;
    const float inv = ws.l[r] > 0.0f ? 1.0f / ws.l[r] : 0.0f;
    for (int64_t c = 0; c < p.dv; ++c) o[c] = T(acc[c] * inv);
  }
}

// Merges the key-split partials of every row into normalised output.
template <typename T>
void combine_splits(const Problem& p, const float* partial, T* out) {
  const int64_t stride_row = p.dv + 2;
  const int64_t n_base = p.b * p.hkv * p.nqb;
  parallel_for(n_base, 1, [&](int64_t x0, int64_t x1) {
    thread_local std::vector<float> acc;
    acc.resize(p.dv);
    for (int64_t x = x0; x < x1; ++x) {
      const int64_t qblock = x % p.nqb, g = (x / p.nqb) % p.hkv, b = x / (p.nqb * p.hkv);
      const int64_t i0 = qblock * p.qb, ni = std::min(p.qb, p.lq - i0);
      for (int64_t r = 0; r < ni * p.group; ++r) {
        float m = kNegInf;
        for (int64_t sp = 0; sp < p.splits; ++sp) {
          m = std::max(m, partial[((x * p.splits + sp) * p.qb * p.group + r) * stride_row]);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        float l = 0.0f;
        for (int64_t sp = 0; sp < p.splits && m != kNegInf; ++sp) {
          const float* src = partial + ((x * p.splits + sp) * p.qb * p.group + r) * stride_row;
          if (src[1] == 0.0f) continue;
          const float w = std::exp(src[0] - m);
          l += src[1] * w;
          for (int64_t c = 0; c < p.dv; ++c) acc[c] += src[2 + c] * w;
        }
        const int64_t h = g * p.group + r / ni, i = i0 + r % ni;
        T* o = out + ((b * p.hq + h) * p.lq + i) * p.dv;
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t c = 0; c < p.dv; ++c) o[c] = T(acc[c] * inv);
      }
    }
  });
}

template <typename T>
void run(Problem& p, Tensor& out) {
  const int64_t n_base = p.b * p.hkv * p.nqb;
  const int64_t threads = num_threads();
  // Few items (decode): split keys so every thread gets work; each split keeps >= 128 keys.
  p.splits = 1;
  if (n_base < 4 * threads) {
    p.splits = std::min((4 * threads + n_base - 1) / n_base, std::max<int64_t>(1, p.lk / 128));
  }
  const int64_t n_items = n_base * p.splits;
  thread_local std::vector<float> partial_buf;
  float* partial = nullptr;
  if (p.splits > 1) {
    const size_t need = static_cast<size_t>(n_items * p.qb * p.group * (p.dv + 2));
    if (partial_buf.size() < need) partial_buf.resize(need);
    partial = partial_buf.data();
  }
  T* o = out.data<T>();
  // Items go round-robin to threads so causal work (which grows with the query block) evens out.
  const int64_t nt = std::min(threads, n_items);
  parallel_for(nt, 1, [&](int64_t t0, int64_t t1) {
    thread_local Workspace ws;
    ws.reserve(p);
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t item = t; item < n_items; item += nt) run_item<T>(p, item, ws, o, partial);
    }
  });
  if (p.splits > 1) combine_splits<T>(p, partial, o);
}

}  // namespace

void sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const ops::AttentionMask& mask,
          float softcap, Tensor& out) {
  auto unit_inner = [](const Tensor& x) { return x.stride(3) == 1 || x.size(3) <= 1 ? x : x.contiguous(); };
  Problem p;
  p.q = unit_inner(q);
  p.k = unit_inner(k);
  p.v = unit_inner(v);
  p.b = q.size(0), p.hq = q.size(1), p.lq = q.size(2), p.d = q.size(3);
  p.hkv = k.size(1), p.lk = k.size(2), p.dv = v.size(3);
  p.group = p.hq / p.hkv;
  p.scale = scale;
  p.softcap = softcap;
  p.mask = &mask;
  p.qb = std::clamp<int64_t>(64 / p.group, 1, p.lq);
  p.nqb = (p.lq + p.qb - 1) / p.qb;
  // A key block of K and V rows (f32) stays within 16 KiB so it is read from L1 by every row of the item.
  p.kb = std::clamp<int64_t>(4096 / std::max<int64_t>(p.d + p.dv, 1) / 8 * 8, 8, 128);
  p.kv_len.assign(p.b, p.lk);
  if (mask.kv_len.defined()) {
    const int32_t* kl = mask.kv_len.data<int32_t>();
    for (int64_t i = 0; i < p.b; ++i) {
      const int64_t len = kl[i * mask.kv_len.stride(0)];
      TERN_CHECK(len >= 0 && len <= p.lk, "[sdpa] expected kv_len[{}] in [0, {}], got {}", i, p.lk, len);
      p.kv_len[i] = len;
    }
  }
  Tensor bias;
  if (mask.bias.defined()) {
    bias = mask.bias.broadcast_to({p.b, p.hq, p.lq, p.lk});
    p.bias = bias.data<float>();
    p.bias_strides = bias.strides();
  }
  switch (q.dtype()) {
    case Dtype::f32: run<float>(p, out); break;
    case Dtype::bf16: run<bf16>(p, out); break;
    case Dtype::f16: run<f16>(p, out); break;
    default: TERN_THROW("[sdpa] expected f32, bf16 or f16, got {}", dtype_name(q.dtype()));
  }
}

}  // namespace tern::cpu
