// CPU gated DeltaNet ops: row-wise L2 norm, the depthwise causal conv1d, and the gated delta rule —
// token by token, or chunked: within a chunk the delta-rule updates are folded by a unit lower-triangular
// (UT) solve, so only one state read and one state update happen per chunk. One (row, head) per task.
#include <cmath>
#include <vector>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/delta.h"

namespace tern::cpu {
namespace {

// Operand layout shared by both delta-rule forms (contiguous tensors, see ops::gated_delta_rule).
struct DeltaDims {
  int64_t B, L, Hk, Dk, Hv, Dv;
  const float *q, *k, *v, *g, *beta;
  float *state, *out;

  const float* q_at(int64_t b, int64_t t, int64_t h) const { return q + ((b * L + t) * Hk + h / (Hv / Hk)) * Dk; }
  const float* k_at(int64_t b, int64_t t, int64_t h) const { return k + ((b * L + t) * Hk + h / (Hv / Hk)) * Dk; }
  const float* v_at(int64_t b, int64_t t, int64_t h) const { return v + ((b * L + t) * Hv + h) * Dv; }
  float* o_at(int64_t b, int64_t t, int64_t h) const { return out + ((b * L + t) * Hv + h) * Dv; }
  float g_at(int64_t b, int64_t t, int64_t h) const { return g[(b * L + t) * Hv + h]; }
  float beta_at(int64_t b, int64_t t, int64_t h) const { return beta[(b * L + t) * Hv + h]; }
  float* state_at(int64_t b, int64_t h) const { return state + (b * Hv + h) * Dk * Dv; }
};

void delta_recurrent(const DeltaDims& d, int64_t b, int64_t h) {
  float* S = d.state_at(b, h);  // [Dk, Dv]
  std::vector<float> delta(d.Dv);
  for (int64_t t = 0; t < d.L; ++t) {
    const float* qt = d.q_at(b, t, h);
    const float* kt = d.k_at(b, t, h);
    const float* vt = d.v_at(b, t, h);
    const float decay = std::exp(d.g_at(b, t, h)), bt = d.beta_at(b, t, h);
    for (int64_t i = 0; i < d.Dk * d.Dv; ++i) S[i] *= decay;
    for (int64_t j = 0; j < d.Dv; ++j) delta[j] = 0.0f;
    for (int64_t i = 0; i < d.Dk; ++i) {
      for (int64_t j = 0; j < d.Dv; ++j) delta[j] += S[i * d.Dv + j] * kt[i];
    }
    for (int64_t j = 0; j < d.Dv; ++j) delta[j] = (vt[j] - delta[j]) * bt;
    for (int64_t i = 0; i < d.Dk; ++i) {
      for (int64_t j = 0; j < d.Dv; ++j) S[i * d.Dv + j] += kt[i] * delta[j];
    }
    float* ot = d.o_at(b, t, h);
    for (int64_t j = 0; j < d.Dv; ++j) ot[j] = 0.0f;
    for (int64_t i = 0; i < d.Dk; ++i) {
      for (int64_t j = 0; j < d.Dv; ++j) ot[j] += S[i * d.Dv + j] * qt[i];
    }
  }
}

// One chunk of n positions from t0 (cum = in-chunk cumulative log decay):
//   T = I + strictly_lower(beta_i k_i.k_j exp(cum_i - cum_j)); T U = beta v; T W = beta k exp(cum)
//   v_new = U - W S;  o = exp(cum) q S + tril(q_i.k_j exp(cum_i - cum_j)) v_new
//   S <- exp(cum_last) S + sum_j exp(cum_last - cum_j) k_j v_new_j^T
// The chunk's intermediates are double: the triangular solve amplifies rounding, and in f32 a 64-long
// chunk drifts measurably from the token-by-token recurrence; the state stays f32 between chunks.
void delta_chunked(const DeltaDims& d, int64_t b, int64_t h, int64_t chunk) {
  const int64_t Dk = d.Dk, Dv = d.Dv;
  float* S = d.state_at(b, h);  // [Dk, Dv]
  std::vector<double> cum(chunk), U(chunk * Dv), W(chunk * Dk), acc(Dk * Dv), qs(Dv);
  auto dot = [Dk](const float* a, const float* c) {
    double s = 0.0;
    for (int64_t i = 0; i < Dk; ++i) s += static_cast<double>(a[i]) * c[i];
    return s;
  };
  for (int64_t t0 = 0; t0 < d.L; t0 += chunk) {
    const int64_t n = std::min(chunk, d.L - t0);
    double c = 0.0;
    for (int64_t i = 0; i < n; ++i) cum[i] = (c += d.g_at(b, t0 + i, h));
    // Forward substitution of the unit lower-triangular system, row by row.
    for (int64_t i = 0; i < n; ++i) {
      const float* ki = d.k_at(b, t0 + i, h);
      const float* vi = d.v_at(b, t0 + i, h);
      const double bi = d.beta_at(b, t0 + i, h), ei = std::exp(cum[i]);
      double* Ui = U.data() + i * Dv;
      double* Wi = W.data() + i * Dk;
      for (int64_t j = 0; j < Dv; ++j) Ui[j] = vi[j] * bi;
      for (int64_t j = 0; j < Dk; ++j) Wi[j] = ki[j] * bi * ei;
      for (int64_t j = 0; j < i; ++j) {
        const double a = bi * dot(ki, d.k_at(b, t0 + j, h)) * std::exp(cum[i] - cum[j]);
        const double* Uj = U.data() + j * Dv;
        const double* Wj = W.data() + j * Dk;
        for (int64_t x = 0; x < Dv; ++x) Ui[x] -= a * Uj[x];
        for (int64_t x = 0; x < Dk; ++x) Wi[x] -= a * Wj[x];
      }
    }
    // v_new = U - W S, in place in U.
    for (int64_t i = 0; i < n; ++i) {
      double* Ui = U.data() + i * Dv;
      const double* Wi = W.data() + i * Dk;
      for (int64_t x = 0; x < Dk; ++x) {
        const double w = Wi[x];
        const float* Sx = S + x * Dv;
        for (int64_t j = 0; j < Dv; ++j) Ui[j] -= w * Sx[j];
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const float* qi = d.q_at(b, t0 + i, h);
      for (int64_t j = 0; j < Dv; ++j) qs[j] = 0.0;
      for (int64_t x = 0; x < Dk; ++x) {
        const float* Sx = S + x * Dv;
        for (int64_t j = 0; j < Dv; ++j) qs[j] += static_cast<double>(qi[x]) * Sx[j];
      }
      const double ei = std::exp(cum[i]);
      for (int64_t j = 0; j < Dv; ++j) qs[j] *= ei;
      for (int64_t s = 0; s <= i; ++s) {
        const double a = dot(qi, d.k_at(b, t0 + s, h)) * std::exp(cum[i] - cum[s]);
        const double* Us = U.data() + s * Dv;
        for (int64_t j = 0; j < Dv; ++j) qs[j] += a * Us[j];
      }
      float* oi = d.o_at(b, t0 + i, h);
      for (int64_t j = 0; j < Dv; ++j) oi[j] = static_cast<float>(qs[j]);
    }
    const double last = cum[n - 1], chunk_decay = std::exp(last);
    for (int64_t i = 0; i < Dk * Dv; ++i) acc[i] = S[i] * chunk_decay;
    for (int64_t s = 0; s < n; ++s) {
      const float* ks = d.k_at(b, t0 + s, h);
      const double e = std::exp(last - cum[s]);
      const double* Us = U.data() + s * Dv;
      for (int64_t x = 0; x < Dk; ++x) {
        const double kx = ks[x] * e;
        double* Ax = acc.data() + x * Dv;
        for (int64_t j = 0; j < Dv; ++j) Ax[j] += kx * Us[j];
      }
    }
    for (int64_t i = 0; i < Dk * Dv; ++i) S[i] = static_cast<float>(acc[i]);
  }
}

}  // namespace

void l2norm(const Tensor& x, float eps, Tensor& out) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  detail::dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    parallel_for(rows, std::max<int64_t>(1, detail::kGrain / d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xs = px + r * d;
        T* os = po + r * d;
        float ss = 0.0f;
        for (int64_t i = 0; i < d; ++i) ss += static_cast<float>(xs[i]) * static_cast<float>(xs[i]);
        const float inv = 1.0f / std::sqrt(ss + eps);
        for (int64_t i = 0; i < d; ++i) os[i] = T(static_cast<float>(xs[i]) * inv);
      }
    });
  });
}

void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history, Tensor& out) {
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2), K = weight.size(1), H = K - 1;
  const float* px = x.data<float>();
  const float* pw = weight.data<float>();
  float* ph = history.data<float>();
  float* po = out.data<float>();
  // xx(b, s, c) = cat(history, x)[b, s, c] for s in [0, L + K - 1)
  auto xx = [&](int64_t b, int64_t s, int64_t c) {
    return s < H ? ph[(b * H + s) * C + c] : px[(b * L + s - H) * C + c];
  };
  parallel_for(B * C, std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(L * K, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> next(H);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / C, c = r % C;
      const float* wc = pw + c * K;
      for (int64_t t = 0; t < L; ++t) {
        float acc = 0.0f;
        for (int64_t j = 0; j < K; ++j) acc += wc[j] * xx(b, t + j, c);
        po[(b * L + t) * C + c] = acc;
      }
      for (int64_t s = 0; s < H; ++s) next[s] = xx(b, L + s, c);
      for (int64_t s = 0; s < H; ++s) ph[(b * H + s) * C + c] = next[s];
    }
  });
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      Tensor& state, ops::DeltaRuleAlgo algo, int64_t chunk, Tensor& out) {
  DeltaDims d{q.size(0), q.size(1), q.size(2), q.size(3), v.size(2), v.size(3),
              q.data<float>(), k.data<float>(), v.data<float>(), g.data<float>(), beta.data<float>(),
              state.data<float>(), out.data<float>()};
  parallel_for(d.B * d.Hv, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (algo == ops::DeltaRuleAlgo::recurrent) {
        delta_recurrent(d, r / d.Hv, r % d.Hv);
      } else {
        delta_chunked(d, r / d.Hv, r % d.Hv, chunk);
      }
    }
  });
}

}  // namespace tern::cpu
