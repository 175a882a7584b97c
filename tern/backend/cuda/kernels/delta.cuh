// Gated DeltaNet kernels: row-wise L2 norm, the depthwise causal conv1d (outputs, then the carried
// history), and the token-by-token gated delta rule with each thread owning one state column.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

// One block per row of d elements: out = x / sqrt(sum(x^2) + eps), f32 math.
template <typename T>
__global__ void l2norm_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t d, float eps) {
  const T* xr = x + blockIdx.x * d;
  T* yr = out + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = from_f32<T>(to_f32(xr[i]) * inv);
}

// One thread per output (b, t, c) of the [B, L, C] conv: sum_j w[c, j] * xx[b, t + j, c], where xx is
// cat(history [B, K-1, C], x [B, L, C]) along time. Reads history only; the history kernel runs after.
__global__ void causal_conv1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ hist, float* __restrict__ out, int64_t B, int64_t L,
                                     int64_t C, int64_t K) {
  const int64_t n = B * L * C, H = K - 1;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, t = (i / C) % L, b = i / (C * L);
    const float* wc = w + c * K;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t s = t + j;  // position in xx
      const float v = s < H ? hist[(b * H + s) * C + c] : x[(b * L + s - H) * C + c];
      acc += wc[j] * v;
    }
    out[i] = acc;
  }
}

// One thread per (b, c): history <- the last K-1 rows of cat(history, x). Rows are written in
// ascending order and row s reads row L + s > s, so the update is safe in place.
__global__ void conv_history_kernel(const float* __restrict__ x, float* __restrict__ hist, int64_t B, int64_t L,
                                    int64_t C, int64_t K) {
  const int64_t n = B * C, H = K - 1;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, b = i / C;
    for (int64_t s = 0; s < H; ++s) {
      const int64_t p = L + s;  // position in xx
      hist[(b * H + s) * C + c] = p < H ? hist[(b * H + p) * C + c] : x[(b * L + p - H) * C + c];
    }
  }
}

constexpr int kDeltaCols = 32;  // state columns (value dims) per block of the recurrent kernel

// The gated delta rule, token by token. Block (column tile, value head h, batch row b); thread j owns
// state column S[:, j] ([Dk] floats in shared memory, column-interleaved so a warp hits distinct
// banks), which is all a step needs per column:
//   S <- exp(g) S;  delta = beta (v_j - S[:, j] . k);  S[:, j] += k delta;  o_j = S[:, j] . q.
// Dynamic shared memory: (Dk * kDeltaCols + 2 * Dk) floats. Layouts as in ops::gated_delta_rule.
__global__ void __launch_bounds__(kDeltaCols) delta_recurrent_kernel(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ g, const float* __restrict__ beta, float* __restrict__ state, float* __restrict__ out,
    int64_t L, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv) {
  extern __shared__ float smem[];
  float* S = smem;                     // [Dk, kDeltaCols]
  float* qs = S + Dk * kDeltaCols;     // [Dk]
  float* ks = qs + Dk;                 // [Dk]
  const int64_t b = blockIdx.z, h = blockIdx.y, hk = h / (Hv / Hk);
  const int tj = threadIdx.x;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kDeltaCols + tj;
  const bool active = j < Dv;
  float* Sg = state + (b * Hv + h) * Dk * Dv;  // [Dk, Dv]
  for (int64_t i = 0; i < Dk; ++i) S[i * kDeltaCols + tj] = active ? Sg[i * Dv + j] : 0.0f;
  for (int64_t t = 0; t < L; ++t) {
    const float* qt = q + ((b * L + t) * Hk + hk) * Dk;
    const float* kt = k + ((b * L + t) * Hk + hk) * Dk;
    __syncthreads();  // the previous step is done with qs / ks
    for (int64_t i = tj; i < Dk; i += kDeltaCols) {
      qs[i] = qt[i];
      ks[i] = kt[i];
    }
    __syncthreads();
    const int64_t gi = (b * L + t) * Hv + h;
    const float decay = expf(g[gi]), bt = beta[gi];
    float kv = 0.0f;
    for (int64_t i = 0; i < Dk; ++i) {
      const float s = S[i * kDeltaCols + tj] * decay;
      S[i * kDeltaCols + tj] = s;
      kv += s * ks[i];
    }
    const float vt = active ? v[gi * Dv + j] : 0.0f;
    const float delta = (vt - kv) * bt;
    float o = 0.0f;
    for (int64_t i = 0; i < Dk; ++i) {
      const float s = S[i * kDeltaCols + tj] + ks[i] * delta;
      S[i * kDeltaCols + tj] = s;
      o += s * qs[i];
    }
    if (active) out[gi * Dv + j] = o;
  }
  if (active) {
    for (int64_t i = 0; i < Dk; ++i) Sg[i * Dv + j] = S[i * kDeltaCols + tj];
  }
}

}  // namespace tern::cuda::kernels
