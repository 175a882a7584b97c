// Shared helpers of the CPU kernels: strided row iteration over same-shape operands (dims
// coalesced, no heap), f32 load/store for the float dtypes; exp_f32 comes from tern/base/fast_exp.h.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "tern/base/error.h"
#include "tern/base/fast_exp.h"
#include "tern/base/parallel.h"
#include "tern/core/tensor.h"

namespace tern::cpu::detail {

// Elements per parallel_for block: below this a loop is not worth waking threads for.
constexpr int64_t kGrain = 32768;
constexpr int kMaxDims = 16;

template <typename T>
inline float load(const T* p) { return static_cast<float>(*p); }
template <typename T>
inline void store(T* p, float v) { *p = T(v); }

// Calls fn(T{}) for the float dtypes; other dtypes are a validation bug in ops/.
template <typename Fn>
decltype(auto) dispatch_float(Dtype d, Fn&& fn) {
  switch (d) {
    case Dtype::bf16: return fn(bf16{});
    case Dtype::f16: return fn(f16{});
    default: break;
  }
  TERN_ASSERT(d == Dtype::f32, "expected a float dtype, got {}", dtype_name(d));
  return fn(float{});
}

// N same-shape strided operands seen as rows: the dims before the last are coalesced into `outer`
// dims, the last one (or, with merge_last, everything) becomes `inner`. Offsets are in elements.
template <int N>
struct RowLayout {
  int n_outer = 0;                    // outer dims after coalescing
  int64_t shape[kMaxDims] = {};       // outer sizes
  int64_t strides[N][kMaxDims] = {};  // outer strides per operand
  int64_t inner = 1, inner_stride[N] = {};
  int64_t rows = 1;

  // merge_last: the last dim may merge with the others (element-wise ops); else it stays the row.
  RowLayout(const Shape& s, const std::array<const Tensor*, N>& ts, bool merge_last) {
    const int r = static_cast<int>(s.size());
    TERN_CHECK(r <= kMaxDims, "[cpu] expected rank <= {}, got {}", kMaxDims, r);
    int64_t sh[kMaxDims];
    int64_t st[N][kMaxDims];
    int m = 0;
    for (int d = 0; d < r; ++d) {
      bool is_last = d == r - 1;
      if (s[d] == 1 && (merge_last || !is_last)) continue;
      bool merge = m > 0 && (merge_last || !is_last);
      for (int k = 0; k < N && merge; ++k) merge = st[k][m - 1] == ts[k]->strides()[d] * s[d];
      if (merge) {
        sh[m - 1] *= s[d];
        for (int k = 0; k < N; ++k) st[k][m - 1] = ts[k]->strides()[d];
      } else {
        sh[m] = s[d];
        for (int k = 0; k < N; ++k) st[k][m] = ts[k]->strides()[d];
        ++m;
      }
    }
    if (m > 0) {
      inner = sh[m - 1];
      for (int k = 0; k < N; ++k) inner_stride[k] = st[k][m - 1];
      --m;
    }
    n_outer = m;
    for (int d = 0; d < m; ++d) {
      shape[d] = sh[d];
      rows *= sh[d];
      for (int k = 0; k < N; ++k) strides[k][d] = st[k][d];
    }
  }

  // fn(offsets, count, first): for the elements [begin, end) in row-major order, one call per
  // (partial) row with each operand's offset of its first element (index `first`); step by
  // inner_stride within a call.
  template <typename Fn>
  void for_range(int64_t begin, int64_t end, Fn&& fn) const {
    if (begin >= end) return;
    int64_t row = begin / inner, col = begin % inner;
    int64_t idx[kMaxDims];
    int64_t off[N] = {};
    for (int d = n_outer - 1; d >= 0; --d) {
      idx[d] = row % shape[d];
      row /= shape[d];
      for (int k = 0; k < N; ++k) off[k] += idx[d] * strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t cnt = std::min(inner - col, end - pos);
      int64_t o[N];
      for (int k = 0; k < N; ++k) o[k] = off[k] + col * inner_stride[k];
      fn(static_cast<const int64_t*>(o), cnt, pos);
      pos += cnt;
      col = 0;
      for (int d = n_outer - 1; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += strides[k][d];
        if (++idx[d] < shape[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= shape[d] * strides[k][d];
        idx[d] = 0;
      }
    }
  }

  // Every row, in parallel when there is enough work: fn(offsets, row) per row. Rows of zero
  // elements are not visited.
  template <typename Fn>
  void parallel_rows(Fn&& fn) const {
    if (inner == 0) return;
    int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1));
    parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      for_range(r0 * inner, r1 * inner, [&](const int64_t* o, int64_t, int64_t pos) { fn(o, pos / inner); });
    });
  }

  // Every element, split across threads by element ranges: fn(offsets, count).
  template <typename Fn>
  void parallel_elements(Fn&& fn) const {
    parallel_for(rows * inner, kGrain, [&](int64_t b, int64_t e) {
      for_range(b, e, [&](const int64_t* o, int64_t n, int64_t) { fn(o, n); });
    });
  }
};

using tern::exp_f32;  // tern/base/fast_exp.h

}  // namespace tern::cpu::detail
