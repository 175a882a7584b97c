// CPU reductions along one dim: stable softmax / log_softmax, sum / mean / max, argmax and top-k.
// The reduced dim is moved last by a view; each row is one task; f32 accumulation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/reduce.h"

namespace tern::cpu {
namespace {

using detail::exp_f32;
using detail::RowLayout;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// x with dim moved last and the other dims kept in order (so the outer rows enumerate the reduced
// output in its own order): x itself when dim already is last (no copy), else a permuted view in tmp.
const Tensor& dim_last(const Tensor& x, int dim, Tensor& tmp) {
  if (dim == static_cast<int>(x.rank()) - 1) return x;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < static_cast<int64_t>(x.rank()); ++d)
    if (d != dim) order.push_back(d);
  order.push_back(dim);
  tmp = x.permute(order);
  return tmp;
}

// Largest element of a row; NaN if the row holds one (as torch.max).
template <typename T>
float row_max(const T* x, int64_t sx, int64_t n) {
  float m = kNegInf;
  int nan = 0;
  if (sx == 1) {
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(x[i]);
      m = v > m ? v : m;
      nan |= v != v;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(x[i * sx]);
      m = v > m ? v : m;
      nan |= v != v;
    }
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

template <typename T>
float row_sum(const T* x, int64_t sx, int64_t n) {
  float s = 0.0f;
  if (sx == 1) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += static_cast<float>(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) s += static_cast<float>(x[i * sx]);
  }
  return s;
}

// sum(exp(x - m)) over a row.
template <typename T>
float row_sum_exp(const T* x, int64_t sx, int64_t n, float m) {
  float s = 0.0f;
  if (sx == 1) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += exp_f32(static_cast<float>(x[i]) - m);
  } else {
    for (int64_t i = 0; i < n; ++i) s += exp_f32(static_cast<float>(x[i * sx]) - m);
  }
  return s;
}

template <typename T>
void softmax_row(const T* x, int64_t sx, T* o, int64_t so, int64_t n, bool log) {
  const float m = row_max(x, sx, n);
  if (log) {
    // (x - m) - log(s), in that order: x - m is exact near the max, where log-probs are small.
    const float log_sum = std::log(row_sum_exp(x, sx, n, m));
    for (int64_t i = 0; i < n; ++i) o[i * so] = T((static_cast<float>(x[i * sx]) - m) - log_sum);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (sx == 1 && so == 1) {
      // exp once: keep it in the output, then scale.
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) {
        const float e = exp_f32(x[i] - m);
        o[i] = e;
        s += e;
      }
      const float inv = 1.0f / s;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] *= inv;
      return;
    }
  }
  const float inv = 1.0f / row_sum_exp(x, sx, n, m);
  for (int64_t i = 0; i < n; ++i) o[i * so] = T(exp_f32(static_cast<float>(x[i * sx]) - m) * inv);
}

template <typename T>
void softmax_typed(const Tensor& x, int dim, bool log, Tensor& out) {
  Tensor xtmp, otmp;
  const Tensor& xt = dim_last(x, dim, xtmp);
  const Tensor& ot = dim_last(out, dim, otmp);
  const T* px = static_cast<const T*>(xt.data_ptr());
  T* po = static_cast<T*>(ot.data_ptr());
  RowLayout<2> lay(xt.shape(), {&xt, &ot}, false);
  const int64_t n = lay.inner, sx = lay.inner_stride[0], so = lay.inner_stride[1];
  lay.parallel_rows([&](const int64_t* o, int64_t) { softmax_row(px + o[0], sx, po + o[1], so, n, log); });
}

// out is contiguous and keeps x's other dims in order, so row r of x reduces into out[r].
template <typename T>
void reduce_typed(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out) {
  T* po = static_cast<T*>(out.data_ptr());
  if (x.shape()[dim] == 0) {  // sum of nothing is 0, its mean NaN (as torch)
    const float v = op == ops::ReduceOp::sum ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < out.numel(); ++r) po[r] = T(v);
    return;
  }
  Tensor xtmp;
  const Tensor& xt = dim_last(x, dim, xtmp);
  const T* px = static_cast<const T*>(xt.data_ptr());
  RowLayout<1> lay(xt.shape(), {&xt}, false);
  const int64_t n = lay.inner, sx = lay.inner_stride[0];
  lay.parallel_rows([&](const int64_t* o, int64_t row) {
    const T* xs = px + o[0];
    float r = 0.0f;
    switch (op) {
      case ops::ReduceOp::sum: r = row_sum(xs, sx, n); break;
      case ops::ReduceOp::mean: r = row_sum(xs, sx, n) / static_cast<float>(n); break;
      case ops::ReduceOp::max: r = row_max(xs, sx, n); break;
    }
    po[row] = T(r);
  });
}

// First index of the largest element; a NaN counts as the largest (as torch.argmax).
template <typename T>
int32_t row_argmax(const T* x, int64_t sx, int64_t n) {
  float best = static_cast<float>(x[0]);
  if (best != best) return 0;
  int64_t bi = 0;
  for (int64_t i = 1; i < n; ++i) {
    const float v = static_cast<float>(x[i * sx]);
    if (v > best) {
      best = v;
      bi = i;
    } else if (v != v) {
      return static_cast<int32_t>(i);
    }
  }
  return static_cast<int32_t>(bi);
}

template <typename T>
void argmax_typed(const Tensor& x, int dim, Tensor& out) {
  Tensor xtmp;
  const Tensor& xt = dim_last(x, dim, xtmp);
  const T* px = static_cast<const T*>(xt.data_ptr());
  int32_t* po = static_cast<int32_t*>(out.data_ptr());
  RowLayout<1> lay(xt.shape(), {&xt}, false);
  const int64_t n = lay.inner, sx = lay.inner_stride[0];
  lay.parallel_rows([&](const int64_t* o, int64_t row) { po[row] = row_argmax(px + o[0], sx, n); });
}

template <typename T>
void topk_typed(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices) {
  Tensor xtmp, vtmp, itmp;
  const Tensor& xt = dim_last(x, dim, xtmp);
  const Tensor& vt = dim_last(values, dim, vtmp);
  const Tensor& it = dim_last(indices, dim, itmp);
  const T* px = static_cast<const T*>(xt.data_ptr());
  T* pv = static_cast<T*>(vt.data_ptr());
  int32_t* pi = static_cast<int32_t*>(it.data_ptr());
  // Only the outer dims coalesce, so one layout serves x (inner n) and the outputs (inner k).
  RowLayout<3> lay(xt.shape(), {&xt, &vt, &it}, false);
  const int64_t n = lay.inner, sx = lay.inner_stride[0], sv = vt.strides().back(), si = it.strides().back();
  const int64_t grain = std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(n, 1));
  parallel_for(lay.rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> vals(n);
    std::vector<int32_t> order(n);
    // Descending; ties and NaNs (which rank above every number) by lower index.
    auto before = [&](int32_t a, int32_t b) {
      const float va = vals[a], vb = vals[b];
      const bool na = va != va, nb = vb != vb;
      if (na != nb) return na;
      if (!na && va != vb) return va > vb;
      return a < b;
    };
    lay.for_range(r0 * n, r1 * n, [&](const int64_t* o, int64_t, int64_t) {
      const T* xs = px + o[0];
      for (int64_t i = 0; i < n; ++i) {
        vals[i] = static_cast<float>(xs[i * sx]);
        order[i] = static_cast<int32_t>(i);
      }
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        pv[o[1] + j * sv] = xs[order[j] * sx];
        pi[o[2] + j * si] = order[j];
      }
    });
  });
}

}  // namespace

void softmax(const Tensor& x, int dim, bool log, Tensor& out) {
  detail::dispatch_float(x.dtype(), [&](auto tag) { softmax_typed<decltype(tag)>(x, dim, log, out); });
}

void reduce(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out) {
  detail::dispatch_float(x.dtype(), [&](auto tag) { reduce_typed<decltype(tag)>(x, dim, op, out); });
}

void argmax(const Tensor& x, int dim, Tensor& out) {
  detail::dispatch_float(x.dtype(), [&](auto tag) { argmax_typed<decltype(tag)>(x, dim, out); });
}

void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs) {
  const int64_t rows = logits.size(0), n = logits.size(1);
  const float* px = logits.data<float>();
  int32_t* pi = ids.data<int32_t>();
  float* pl = logprobs.data<float>();
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = px + r * n;
      const int32_t best = row_argmax(x, 1, n);
      const float m = x[best];
      double z = 0.0;  // a row of -inf: 0, so +inf as the device gives
      if (m > -std::numeric_limits<float>::infinity())
        for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(x[i]) - m);
      pi[r] = best;
      pl[r] = static_cast<float>(-std::log(z));
    }
  });
}

void token_logprobs(const Tensor& logits, const Tensor& targets, Tensor& out) {
  const int64_t rows = logits.size(0), n = logits.size(1);
  const int32_t* pt = targets.data<int32_t>();
  float* po = out.data<float>();
  detail::dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = logits.data<T>();
    parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* x = px + r * n;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(static_cast<float>(x[i])));
        double z = 0.0;  // a row of -inf: exp(-inf - -inf) is NaN, as the device gives
        for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(static_cast<float>(x[i])) - m);
        po[r] = static_cast<float>(static_cast<double>(static_cast<float>(x[pt[r]])) - m - std::log(z));
      }
    });
  });
}

void topk(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices) {
  detail::dispatch_float(x.dtype(), [&](auto tag) { topk_typed<decltype(tag)>(x, k, dim, values, indices); });
}

}  // namespace tern::cpu
