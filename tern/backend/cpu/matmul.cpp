// CPU matrix products: batched matmul on OpenBLAS sgemm (bf16/f16 widened per matrix), and linear with
// an AVX2 dot-product kernel for few tokens (the decode path for bf16 weights) and blocked GEMM otherwise.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tern/base/parallel.h"
#include "tern/backend/cpu/widen.h"
#include "tern/ops/matmul.h"

namespace tern::cpu {
namespace {

// Scratch that lives as long as its thread (OpenMP keeps its workers), so hot calls do not allocate.
enum ScratchSlot { kScratchA, kScratchB, kScratchC, kScratchCount };
float* scratch(ScratchSlot slot, size_t n) {
  thread_local std::vector<float> bufs[kScratchCount];
  std::vector<float>& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

using detail::to_f32;
using detail::widen_row;

template <typename T>
void narrow_row(const float* src, int64_t n, T* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
}

// dst [rows, cols] row-major f32 <- src [rows, cols] with element strides (sr, sc), any float type.
template <typename T>
void widen_matrix(const T* src, int64_t rows, int64_t cols, int64_t sr, int64_t sc, float* dst) {
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* s = src + r * sr;
      float* d = dst + r * cols;
      if (sc == 1) {
        widen_row(s, cols, d);
      } else {
        for (int64_t c = 0; c < cols; ++c) d[c] = to_f32(s[c * sc]);
      }
    }
  });
}

// How BLAS can read a stored [rows, cols] matrix: as row-major X (ld) with matrix = X or X^T.
struct BlasLayout {
  bool ok = false;
  bool transposed = false;
  int64_t ld = 0;
};

BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1))) {
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
  }
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1))) {
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
  }
  return {};
}

// Element offset of batch index `i` (row-major over `batch`) under per-dim `strides`.
int64_t batch_offset(int64_t i, const Shape& batch, const Strides& strides) {
  int64_t off = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    off += (i % batch[d]) * strides[d];
    i /= batch[d];
  }
  return off;
}

// A matmul operand broadcast to the output's batch dims: [batch..., rows, cols].
struct Operand {
  Tensor t;
  int64_t rows, cols, sr, sc;
  Strides batch_strides;
};

Operand make_operand(const Tensor& x, const Shape& batch) {
  Shape full = batch;
  full.push_back(x.size(-2));
  full.push_back(x.size(-1));
  Operand o;
  o.t = x.broadcast_to(full);
  o.rows = x.size(-2);
  o.cols = x.size(-1);
  o.sr = o.t.stride(-2);
  o.sc = o.t.stride(-1);
  o.batch_strides.assign(o.t.strides().begin(), o.t.strides().end() - 2);
  return o;
}

// The row stride when the batch dims and the row dim of `o` fold into one row dim walked at a single
// stride (so [batch..., rows] is one tall matrix), else 0.
int64_t folded_row_stride(const Operand& o, const Shape& batch) {
  int64_t rs = o.rows > 1 ? o.sr : 0;
  int64_t span = o.rows;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (rs == 0) {
      rs = o.batch_strides[d];
    } else if (o.batch_strides[d] != rs * span) {
      return 0;
    }
    span *= batch[d];
  }
  return rs >= std::max<int64_t>(o.cols, 1) ? rs : 0;
}

bool all_zero(const Strides& s, const Shape& batch) {
  for (size_t d = 0; d < s.size(); ++d) {
    if (batch[d] != 1 && s[d] != 0) return false;
  }
  return true;
}

void matmul_f32(const Operand& a, const Operand& b, bool trans_a, bool trans_b, const Shape& batch, int64_t m,
                int64_t n, int64_t k, float* c) {
  const BlasLayout la = blas_layout(a.rows, a.cols, a.sr, a.sc);
  const BlasLayout lb = blas_layout(b.rows, b.cols, b.sr, b.sc);
  TERN_ASSERT(la.ok && lb.ok, "[matmul] operands must be BLAS-readable here");
  const CBLAS_TRANSPOSE ta = (trans_a != la.transposed) ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = (trans_b != lb.transposed) ? CblasTrans : CblasNoTrans;
  const float* pa = a.t.data<float>();
  const float* pb = b.t.data<float>();
  const int64_t nbatch = numel(batch);
  // One shared b and a row-stacked a: a single tall GEMM threads far better than many small ones.
  if (nbatch > 1 && ta == CblasNoTrans && !la.transposed && all_zero(b.batch_strides, batch)) {
    if (const int64_t ld = folded_row_stride(a, batch); ld > 0) {
      cblas_sgemm(CblasRowMajor, ta, tb, nbatch * m, n, k, 1.0f, pa, ld, pb, lb.ld, 0.0f, c, n);
      return;
    }
  }
  for (int64_t i = 0; i < nbatch; ++i) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, pa + batch_offset(i, batch, a.batch_strides), la.ld,
                pb + batch_offset(i, batch, b.batch_strides), lb.ld, 0.0f, c + i * m * n, n);
  }
}

template <typename T>
void matmul_widened(const Operand& a, const Operand& b, bool trans_a, bool trans_b, const Shape& batch, int64_t m,
                    int64_t n, int64_t k, T* out) {
  const int64_t nbatch = numel(batch);
  float* fa = scratch(kScratchA, a.rows * a.cols);
  float* fb = scratch(kScratchB, b.rows * b.cols);
  float* fc = scratch(kScratchC, m * n);
  const T* pa = a.t.data<T>();
  const T* pb = b.t.data<T>();
  const T* last_a = nullptr;
  const T* last_b = nullptr;
  for (int64_t i = 0; i < nbatch; ++i) {
    const T* sa = pa + batch_offset(i, batch, a.batch_strides);
    const T* sb = pb + batch_offset(i, batch, b.batch_strides);
    if (sa != last_a) widen_matrix(sa, a.rows, a.cols, a.sr, a.sc, fa);
    if (sb != last_b) widen_matrix(sb, b.rows, b.cols, b.sr, b.sc, fb);
    last_a = sa;
    last_b = sb;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                1.0f, fa, std::max<int64_t>(a.cols, 1), fb, std::max<int64_t>(b.cols, 1), 0.0f, fc, n);
    T* dst = out + i * m * n;
    parallel_for(m * n, 16384, [&](int64_t e0, int64_t e1) { narrow_row(fc + e0, e1 - e0, dst + e0); });
  }
}

// ---- linear ----------------------------------------------------------------------------------------

#if defined(__AVX2__) && defined(__F16C__)
template <typename W>
inline __m256 load8(const W* p) {
  if constexpr (std::is_same_v<W, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<W, bf16>) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// y[t, o] = x[t, :] . w[o, :] for R rows of w starting at `w` and NT tokens; w rows are read once.
template <int R, int NT, typename W>
inline void dot_tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int64_t in, float* y, int64_t ldy) {
  int64_t i = 0;
  float acc_s[R][NT] = {};
#if defined(__AVX2__) && defined(__F16C__)
  __m256 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (; i + 8 <= in; i += 8) {
    __m256 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(x + t * ldx + i);
    for (int r = 0; r < R; ++r) {
      __m256 wv = load8(w + r * ldw + i);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc_s[r][t] = hsum(acc[r][t]);
#endif
  for (; i < in; ++i) {
    for (int r = 0; r < R; ++r) {
      const float wv = to_f32(w[r * ldw + i]);
      for (int t = 0; t < NT; ++t) acc_s[r][t] += wv * x[t * ldx + i];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) y[t * ldy + r] += acc_s[r][t];
}

// Rows [o0, o1) of y (pre-filled with bias or zeros) for NT tokens, R rows of w at a time.
template <int R, int NT, typename W>
void dot_rows(const float* x, int64_t in, const W* w, int64_t ldw, int64_t o0, int64_t o1, float* y, int64_t ldy) {
  int64_t o = o0;
  for (; o + R <= o1; o += R) dot_tile<R, NT>(x, in, w + o * ldw, ldw, in, y + o, ldy);
  for (; o < o1; ++o) dot_tile<1, NT>(x, in, w + o * ldw, ldw, in, y + o, ldy);
}

// Rows [o0, o1) of y for all tokens. Rows go in blocks small enough for L1, and every token tile runs
// over a block before the next, so w streams from memory once whatever the token count.
template <typename W>
void dot_rows_tokens(const float* x, int64_t tokens, int64_t in, const W* w, int64_t ldw, int64_t o0, int64_t o1,
                     float* y, int64_t ldy) {
  const int64_t row_block = std::max<int64_t>(8, (int64_t{16} << 10) / (std::max<int64_t>(in, 1) * sizeof(W)));
  for (int64_t b0 = o0; b0 < o1; b0 += row_block) {
    const int64_t b1 = std::min(o1, b0 + row_block);
    for (int64_t t = 0; t < tokens; t += 4) {
      const float* xt = x + t * in;
      float* yt = y + t * ldy;
      switch (std::min<int64_t>(4, tokens - t)) {
        case 1: dot_rows<8, 1>(xt, in, w, ldw, b0, b1, yt, ldy); break;
        case 2: dot_rows<4, 2>(xt, in, w, ldw, b0, b1, yt, ldy); break;
        case 3: dot_rows<3, 3>(xt, in, w, ldw, b0, b1, yt, ldy); break;
        default: dot_rows<2, 4>(xt, in, w, ldw, b0, b1, yt, ldy); break;
      }
    }
  }
}

// At or below this many tokens the dot kernel beats sgemm (OpenBLAS packs poorly for a few rows) or
// widening w for a GEMM; half-width weights stream at half the bytes, so they keep it longer. Measured
// on 1024x1024 weights, one thread.
template <typename W>
constexpr int64_t kDotMaxTokens = sizeof(W) == 4 ? 8 : 16;

// y [tokens, out] += x [tokens, in] @ w[out, in]^T for any weight type.
template <typename W>
void linear_rows(const float* x, int64_t tokens, int64_t in, const W* w, int64_t ldw, int64_t out, float* y) {
  if (tokens <= kDotMaxTokens<W>) {
    parallel_for(out, 32, [&](int64_t o0, int64_t o1) { dot_rows_tokens(x, tokens, in, w, ldw, o0, o1, y, out); });
    return;
  }
  if constexpr (std::is_same_v<W, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, out, in, 1.0f, x, in, w, ldw, 1.0f, y, out);
  } else {
    // Widen a block of w rows (about 1 MiB of f32) in parallel, then GEMM it from the top level.
    const int64_t block = std::max<int64_t>(16, (int64_t{1} << 18) / std::max<int64_t>(in, 1));
    float* wf = scratch(kScratchB, std::min(block, out) * in);
    for (int64_t o0 = 0; o0 < out; o0 += block) {
      const int64_t nb = std::min(block, out - o0);
      widen_matrix(w + o0 * ldw, nb, in, ldw, 1, wf);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, nb, in, 1.0f, x, in, wf, in, 1.0f, y + o0, out);
    }
  }
}

template <typename T>
void fill_bias(const Tensor& bias, int64_t tokens, int64_t out, float* y) {
  if (!bias.defined()) {
    std::memset(y, 0, sizeof(float) * tokens * out);
    return;
  }
  const T* b = bias.data<T>();
  const int64_t sb = bias.stride(0);
  for (int64_t o = 0; o < out; ++o) y[o] = to_f32(b[o * sb]);
  for (int64_t t = 1; t < tokens; ++t) std::memcpy(y + t * out, y, sizeof(float) * out);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  const int64_t m = out.size(-2), n = out.size(-1);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  if (k == 0) {
    std::memset(out.data_ptr(), 0, out.nbytes());
    return;
  }
  if (a.dtype() == Dtype::f32) {
    auto readable = [](const Tensor& x) {
      return blas_layout(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1)).ok ? x : x.contiguous();
    };
    matmul_f32(make_operand(readable(a), batch), make_operand(readable(b), batch), trans_a, trans_b, batch, m, n, k,
               out.data<float>());
    return;
  }
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
      matmul_widened(make_operand(a, batch), make_operand(b, batch), trans_a, trans_b, batch, m, n, k, out.data<T>());
    } else {
      TERN_THROW("[matmul] expected f32, bf16 or f16, got {}", dtype_name(a.dtype()));
    }
  });
}

void linear(const Tensor& x2d, const Tensor& w_in, const Tensor& bias, Tensor& out2d) {
  const int64_t tokens = x2d.size(0), in = x2d.size(1), out = out2d.size(1);
  const Tensor w = (w_in.stride(1) == 1 || in <= 1) ? w_in : w_in.contiguous();
  const int64_t ldw = out == 1 ? std::max<int64_t>(in, 1) : w.stride(0);

  const float* x = nullptr;
  if (x2d.dtype() == Dtype::f32) {
    x = x2d.data<float>();
  } else {
    float* xf = scratch(kScratchA, tokens * in);
    dispatch_dtype(x2d.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) widen_row(x2d.data<T>(), tokens * in, xf);
    });
    x = xf;
  }
  float* y = out2d.dtype() == Dtype::f32 ? out2d.data<float>() : scratch(kScratchC, tokens * out);

  if (bias.defined()) {
    dispatch_dtype(bias.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
        fill_bias<T>(bias, tokens, out, y);
      }
    });
  } else {
    fill_bias<float>(bias, tokens, out, y);
  }

  if (in > 0) {
    switch (w.dtype()) {
      case Dtype::f32: linear_rows(x, tokens, in, w.data<float>(), ldw, out, y); break;
      case Dtype::bf16: linear_rows(x, tokens, in, w.data<bf16>(), ldw, out, y); break;
      case Dtype::f16: linear_rows(x, tokens, in, w.data<f16>(), ldw, out, y); break;
      default: TERN_THROW("[linear] expected w f32, bf16 or f16, got {}", dtype_name(w.dtype()));
    }
  }

  if (out2d.dtype() != Dtype::f32) {
    dispatch_dtype(out2d.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
        T* dst = out2d.data<T>();
        parallel_for(tokens * out, 16384, [&](int64_t e0, int64_t e1) { narrow_row(y + e0, e1 - e0, dst + e0); });
      }
    });
  }
}

}  // namespace tern::cpu
