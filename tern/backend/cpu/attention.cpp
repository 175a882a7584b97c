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
#include "tern/backend/cpu/attention_kernels.h"
#include "tern/backend/cpu/widen.h"
#include "tern/ops/attention.h"

namespace tern::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using detail::accumulate_values;
using detail::exp_shift;
using detail::scores;
using detail::to_f32;
using detail::widen_row;

// dst[i] = float(src[i]) * mul (the query row, pre-scaled).
template <typename T>
void widen_row_scaled(const T* src, int64_t n, float* dst, float mul) {
  widen_row(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] *= mul;
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
      if (p.softcap > 0.0f) detail::apply_softcap(s, n, p.softcap);
      if (p.bias) {
        const int64_t h = g * p.group + r / ni, i = i0 + r % ni;
        const float* br = p.bias + b * p.bias_strides[0] + h * p.bias_strides[1] + i * p.bias_strides[2];
        const int64_t sj = p.bias_strides[3];
        for (int64_t j = 0; j < n; ++j) s[j] += br[(a + j) * sj];
      }
      detail::online_softmax_block(s, n, vp + (a - j0) * ldv, ldv, p.dv, ws.m[r], ws.l[r], ws.acc.data() + r * p.dv);
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
        const float l = detail::merge_splits(p.splits, p.dv, [&](int64_t sp) {
          return partial + ((x * p.splits + sp) * p.qb * p.group + r) * stride_row;
        }, acc.data());
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
      TERN_CHECK(len >= 0, "[sdpa] expected kv_len[{}] >= 0, got {}", i, len);
      p.kv_len[i] = std::min(len, p.lk);  // past Lk: every key visible, as the CUDA kernels read it
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
