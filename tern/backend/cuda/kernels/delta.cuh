// Gated DeltaNet kernels: row-wise L2 norm, the depthwise causal conv1d (outputs, then the carried
// history), and the gated delta rule: token by token (a thread per state column) and chunked (a block per
// tile of state columns walks the chunks, each folded by a triangular solve in f64).
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

// One block per row of d elements: out = x / sqrt(sum(x^2) + eps), f32 math.
template <typename T>
__global__ void l2norm_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t d, float eps) {
  grid_dependency_wait();
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
  grid_dependency_wait();
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
  grid_dependency_wait();
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
  grid_dependency_wait();
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

constexpr int kChunkCols = 32;      // state columns per block of the chunked kernel
constexpr int kChunkThreads = 128;  // threads per block of the chunked kernel
constexpr int kMaxChunk = 64;       // positions per chunk (the f64 chunk matrix is kMaxChunk^2)

// Dynamic shared memory of delta_chunked_kernel for chunk positions and key dim Dk.
__host__ __device__ constexpr size_t delta_chunked_smem(int64_t chunk, int64_t Dk) {
  return static_cast<size_t>(chunk * chunk + chunk * kChunkCols + 4 * chunk) * sizeof(double) +
         static_cast<size_t>(Dk * kChunkCols + chunk * (Dk + 1)) * sizeof(float);
}

// The gated delta rule over chunks of `chunk` positions (the CPU's WY / UT form). Block (column tile,
// value head h, batch row b) holds its columns of the state S [Dk, 32] and, per chunk from t0 (cum =
// in-chunk cumulative g, e = exp(cum)):
//   A[i, j] = beta_i k_i.k_j exp(cum_i - cum_j) (j < i);  (I + A) v_new = beta (v - e k S)  (forward
//   substitution; the CPU's U - W S folded into one solve, as (I + A)^-1 is linear);
//   o_i = e_i q_i S + sum_{s <= i} q_i.k_s exp(cum_i - cum_s) v_new_s;
//   S <- exp(cum_last) S + sum_s exp(cum_last - cum_s) k_s v_new_s^T.
// The chunk's intermediates are f64 (the solve amplifies rounding); S stays f32. Keys of the chunk are
// staged in shared memory with a padded row stride. Layouts as in ops::gated_delta_rule.
__global__ void __launch_bounds__(kChunkThreads) delta_chunked_kernel(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ g, const float* __restrict__ beta, float* __restrict__ state, float* __restrict__ out,
    int64_t L, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t chunk) {
  grid_dependency_wait();
  extern __shared__ double dsm[];
  constexpr int C = kChunkCols;
  double* A = dsm;                    // [chunk, chunk]: the solve's matrix, then the q.k decay matrix
  double* Vn = A + chunk * chunk;     // [chunk, C]: the right-hand side, then v_new
  double* cum = Vn + chunk * C;       // [chunk]
  double* bet = cum + chunk;          // [chunk]
  double* ecum = bet + chunk;         // [chunk] exp(cum_i)
  double* tail = ecum + chunk;        // [chunk] exp(cum_last - cum_i)
  float* S = reinterpret_cast<float*>(tail + chunk);  // [Dk, C]
  float* Ks = S + Dk * C;                              // [chunk, Dk + 1]
  const int64_t ks = Dk + 1;
  const int64_t b = blockIdx.z, h = blockIdx.y, hk = h / (Hv / Hk), c0 = static_cast<int64_t>(blockIdx.x) * C;
  const int64_t cols = Dv - c0 < C ? Dv - c0 : C;
  const int tid = threadIdx.x, nt = blockDim.x;
  float* Sg = state + (b * Hv + h) * Dk * Dv;  // [Dk, Dv]
  for (int64_t idx = tid; idx < Dk * C; idx += nt) {
    const int64_t x = idx / C, c = idx % C;
    S[idx] = c < cols ? Sg[x * Dv + c0 + c] : 0.0f;
  }
  for (int64_t t0 = 0; t0 < L; t0 += chunk) {
    const int64_t n = L - t0 < chunk ? L - t0 : chunk;
    __syncthreads();  // the previous chunk is done with the shared buffers
    if (tid == 0) {
      double a = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t gi = (b * L + t0 + i) * Hv + h;
        cum[i] = (a += g[gi]);
        bet[i] = beta[gi];
        ecum[i] = exp(cum[i]);
      }
      for (int64_t i = 0; i < n; ++i) tail[i] = exp(cum[n - 1] - cum[i]);
    }
    for (int64_t idx = tid; idx < n * Dk; idx += nt) {
      const int64_t i = idx / Dk, x = idx % Dk;
      Ks[i * ks + x] = k[((b * L + t0 + i) * Hk + hk) * Dk + x];
    }
    __syncthreads();
    for (int64_t idx = tid; idx < n * n; idx += nt) {
      const int64_t i = idx / n, j = idx % n;
      if (j >= i) continue;
      double d = 0.0;
      for (int64_t x = 0; x < Dk; ++x) d += static_cast<double>(Ks[i * ks + x]) * Ks[j * ks + x];
      A[i * chunk + j] = bet[i] * d * exp(cum[i] - cum[j]);
    }
    for (int64_t idx = tid; idx < n * C; idx += nt) {
      const int64_t i = idx / C, c = idx % C;
      double kS = 0.0;
      for (int64_t x = 0; x < Dk; ++x) kS += static_cast<double>(Ks[i * ks + x]) * S[x * C + c];
      const double vi = c < cols ? v[((b * L + t0 + i) * Hv + h) * Dv + c0 + c] : 0.0;
      Vn[i * C + c] = bet[i] * (vi - ecum[i] * kS);
    }
    __syncthreads();
    if (tid < C) {  // forward substitution, one column per thread
      for (int64_t i = 1; i < n; ++i) {
        double acc = Vn[i * C + tid];
        for (int64_t j = 0; j < i; ++j) acc -= A[i * chunk + j] * Vn[j * C + tid];
        Vn[i * C + tid] = acc;
      }
    }
    __syncthreads();
    for (int64_t idx = tid; idx < n * n; idx += nt) {
      const int64_t i = idx / n, s = idx % n;
      if (s > i) continue;
      const float* qi = q + ((b * L + t0 + i) * Hk + hk) * Dk;
      double d = 0.0;
      for (int64_t x = 0; x < Dk; ++x) d += static_cast<double>(qi[x]) * Ks[s * ks + x];
      A[i * chunk + s] = d * exp(cum[i] - cum[s]);
    }
    __syncthreads();
    for (int64_t idx = tid; idx < n * C; idx += nt) {
      const int64_t i = idx / C, c = idx % C;
      const float* qi = q + ((b * L + t0 + i) * Hk + hk) * Dk;
      double qS = 0.0;
      for (int64_t x = 0; x < Dk; ++x) qS += static_cast<double>(qi[x]) * S[x * C + c];
      double o = qS * ecum[i];
      for (int64_t s = 0; s <= i; ++s) o += A[i * chunk + s] * Vn[s * C + c];
      if (c < cols) out[((b * L + t0 + i) * Hv + h) * Dv + c0 + c] = static_cast<float>(o);
    }
    __syncthreads();  // every output has read S
    const double decay = ecum[n - 1];
    for (int64_t idx = tid; idx < Dk * C; idx += nt) {
      const int64_t x = idx / C, c = idx % C;
      double acc = S[idx] * decay;
      for (int64_t s = 0; s < n; ++s) acc += static_cast<double>(Ks[s * ks + x]) * tail[s] * Vn[s * C + c];
      S[idx] = static_cast<float>(acc);
    }
  }
  __syncthreads();
  for (int64_t idx = tid; idx < Dk * C; idx += nt) {
    const int64_t x = idx / C, c = idx % C;
    if (c < cols) Sg[x * Dv + c0 + c] = S[idx];
  }
}

}  // namespace tern::cuda::kernels
