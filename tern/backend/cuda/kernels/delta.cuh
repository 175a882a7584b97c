// Gated DeltaNet kernels: row-wise L2 norm, the depthwise causal conv1d (outputs, then the carried
// history), and the gated delta rule: token by token (a thread per state column) and chunked (every
// chunk's triangular solve at once, then a block per tile of state columns walks the chunks).
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

// The chunked gated delta rule (the CPU's WY / UT form) in two kernels. Per chunk of n <= kMaxChunk
// positions from t0, with cum the in-chunk cumulative g, e_i = exp(cum_i), tail_i = exp(cum_last - cum_i):
//   T = (I + A)^-1, A[i, j] = beta_i k_i.k_j exp(cum_i - cum_j) (j < i);  P[i, s] = q_i.k_s exp(cum_i - cum_s)
//   v_new = T (beta (v - e k S));  o_i = e_i q_i S + sum_{s <= i} P[i, s] v_new_s;
//   S <- exp(cum_last) S + sum_s tail_s k_s v_new_s^T.
// delta_chunk_prep_kernel computes T, P, e and tail for every chunk at once (they do not depend on S);
// delta_chunk_scan_kernel walks the chunks in order per tile of state columns and does only the products
// with S. The key Gram, the solve and T's product are f64 (the solve amplifies rounding); the products
// with S and P sum in f32, and S, T and P are stored in f32.
constexpr int kMaxChunk = 64;       // positions per chunk
constexpr int kChunkThreads = 256;  // threads per block of both kernels
constexpr int kScanCols = 32;       // state columns per block of the scan (a lane each)
constexpr int kScanWarps = kChunkThreads / 32;
constexpr int kMatStride = kMaxChunk + 1;  // row stride of the f64 chunk matrices in shared memory

// Dynamic shared memory of the prep kernel: the chunk's keys and queries (row stride Dk + 1), later
// reused for A / T, then the key Gram G and the query-key matrix P, then cum and beta.
__host__ __device__ constexpr size_t delta_prep_smem(int64_t Dk) {
  const size_t kq = static_cast<size_t>(2 * kMaxChunk * (Dk + 1)) * sizeof(float);
  const size_t a = static_cast<size_t>(kMaxChunk * kMatStride) * sizeof(double);
  return (kq > a ? kq : a) + static_cast<size_t>(2 * kMaxChunk * kMatStride + 2 * kMaxChunk) * sizeof(double);
}

// Dynamic shared memory of the scan kernel: the right-hand side [64, 32] (f64), v_new [64, 32], S [Dk,
// 32], the chunk's queries and keys [64, Dk] each, T and P [64, 64], e, tail and beta (Dk 256: 217 KB).
__host__ __device__ constexpr size_t delta_scan_smem(int64_t Dk) {
  return static_cast<size_t>(kMaxChunk * kScanCols) * sizeof(double) +
         static_cast<size_t>(kMaxChunk * kScanCols + Dk * kScanCols + 2 * kMaxChunk * Dk + 2 * kMaxChunk * kMaxChunk +
                             3 * kMaxChunk) *
             sizeof(float);
}

// Grid (chunks, Hk, B), kChunkThreads threads. The Gram and query-key dots of a key head's chunk are
// shared by the Hv / Hk value heads it serves; per value head: cum, A, the solve (row by row, four
// threads per entry), then T [64, 64] and P [64, 64] (rows < n in full, zero past the diagonal) to Tg /
// Pg at chunk (b, h, c), and e and tail to eg / tg at [b, h, t]. Layouts of q, k, g, beta as in ops::gated_delta_rule.
__global__ void __launch_bounds__(kChunkThreads)
    delta_chunk_prep_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ g,
                            const float* __restrict__ beta, float* __restrict__ Tg, float* __restrict__ Pg,
                            float* __restrict__ eg, float* __restrict__ tg, int64_t L, int64_t Hk, int64_t Dk,
                            int64_t Hv, int64_t chunk) {
  grid_dependency_wait();
  extern __shared__ double dsm[];
  const int64_t ks = Dk + 1;
  const size_t kq_doubles =
      (static_cast<size_t>(2 * kMaxChunk * ks) * sizeof(float) + sizeof(double) - 1) / sizeof(double);
  const size_t head = kq_doubles > static_cast<size_t>(kMaxChunk * kMatStride)
                          ? kq_doubles
                          : static_cast<size_t>(kMaxChunk * kMatStride);
  float* Ks = reinterpret_cast<float*>(dsm);  // [n, Dk + 1]
  float* Qs = Ks + kMaxChunk * ks;            // [n, Dk + 1]
  double* A = dsm;                            // [64, 65]: A, solved into T in place (over Ks / Qs)
  double* G = dsm + head;                     // [64, 65] k_i.k_j
  double* P = G + kMaxChunk * kMatStride;     // [64, 65] q_i.k_s
  double* cum = P + kMaxChunk * kMatStride;   // [64]
  double* bet = cum + kMaxChunk;              // [64]
  const int64_t c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, t0 = c * chunk, nchunks = gridDim.x;
  const int64_t n = L - t0 < chunk ? L - t0 : chunk;
  const int tid = threadIdx.x;
  for (int64_t idx = tid; idx < n * Dk; idx += kChunkThreads) {
    const int64_t i = idx / Dk, x = idx % Dk, at = ((b * L + t0 + i) * Hk + hk) * Dk + x;
    Ks[i * ks + x] = k[at];
    Qs[i * ks + x] = q[at];
  }
  __syncthreads();
  for (int64_t idx = tid; idx < n * n; idx += kChunkThreads) {
    const int64_t i = idx / n, j = idx % n;
    if (j > i) continue;
    double dk = 0.0;
    float dq = 0.0f;
    for (int64_t x = 0; x < Dk; ++x) {
      const float kj = Ks[j * ks + x];
      dk += static_cast<double>(Ks[i * ks + x]) * kj;
      dq += Qs[i * ks + x] * kj;
    }
    G[i * kMatStride + j] = dk;
    P[i * kMatStride + j] = dq;
  }
  const int64_t per = Hv / Hk;
  for (int64_t h = hk * per; h < (hk + 1) * per; ++h) {
    __syncthreads();  // G and P are complete; the previous head is done with A, cum and bet
    if (tid == 0) {
      double a = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t gi = (b * L + t0 + i) * Hv + h;
        cum[i] = (a += g[gi]);
        bet[i] = beta[gi];
      }
    }
    __syncthreads();
    float* Tc = Tg + ((b * Hv + h) * nchunks + c) * kMaxChunk * kMaxChunk;
    float* Pc = Pg + ((b * Hv + h) * nchunks + c) * kMaxChunk * kMaxChunk;
    for (int idx = tid; idx < n * kMaxChunk; idx += kChunkThreads) {  // Pc's rows in full: zeros past i
      const int i = idx / kMaxChunk, j = idx % kMaxChunk;
      const double d = j <= i ? exp(cum[i] - cum[j]) : 0.0;
      if (j <= i) A[i * kMatStride + j] = j == i ? 1.0 : bet[i] * G[i * kMatStride + j] * d;
      Pc[idx] = j <= i ? static_cast<float>(P[i * kMatStride + j] * d) : 0.0f;
    }
    for (int64_t i = tid; i < n; i += kChunkThreads) {
      const int64_t at = (b * Hv + h) * L + t0 + i;
      eg[at] = static_cast<float>(exp(cum[i]));
      tg[at] = static_cast<float>(exp(cum[n - 1] - cum[i]));
    }
    __syncthreads();
    // Row i of T from rows < i (already T) and row i of A: T[i, j] = -sum_{m = j}^{i - 1} A[i, m] T[m, j],
    // T[m, m] = 1. Entry j takes threads 4j .. 4j + 3 (consecutive lanes), each a quarter of the m.
    const int64_t j = tid >> 2, part = tid & 3;
    for (int64_t i = 1; i < n; ++i) {
      double acc = 0.0;
      if (j < i) {
        for (int64_t m = j + part; m < i; m += 4) acc += A[i * kMatStride + m] * A[m * kMatStride + j];
      }
      acc += __shfl_xor_sync(0xffffffffu, acc, 1);
      acc += __shfl_xor_sync(0xffffffffu, acc, 2);
      __syncthreads();  // every thread has read row i of A
      if (j < i && part == 0) A[i * kMatStride + j] = -acc;
      __syncthreads();
    }
    for (int idx = tid; idx < n * kMaxChunk; idx += kChunkThreads) {  // Tc's rows in full: zeros past i
      const int i = idx / kMaxChunk, j = idx % kMaxChunk;
      Tc[idx] = j <= i ? static_cast<float>(A[i * kMatStride + j]) : 0.0f;
    }
  }
}

// Grid (ceil(Dv / 32), Hv, B), kChunkThreads threads: lane c owns state column c0 + c; warp w the chunk
// rows w, w + 8, ... of the row-wise products and the state rows [8w, 8w + 8) + 64m of the update.
// Walks the chunks in order with T, P, e and tail from delta_chunk_prep_kernel. Dk % 4 == 0 and q, k
// 16-byte aligned: rows are staged and read four floats at a time. Every product keeps one accumulator
// per row (eight independent chains per thread). Rows of T and P past the diagonal are zero, and the
// right-hand side and v_new start at zero, so their products run over whole groups of four.
__global__ void __launch_bounds__(kChunkThreads)
    delta_chunk_scan_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                            const float* __restrict__ beta, const float* __restrict__ Tg, const float* __restrict__ Pg,
                            const float* __restrict__ eg, const float* __restrict__ tg, float* __restrict__ state,
                            float* __restrict__ out, int64_t L, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv,
                            int64_t chunk) {
  grid_dependency_wait();
  extern __shared__ double dsm[];
  constexpr int C = kScanCols, W = kScanWarps, R = kMaxChunk / kScanWarps;  // R rows per warp
  constexpr int M4 = kMaxChunk / 4;                                         // float4s per row of T / P
  const int dk = static_cast<int>(Dk), dk4 = dk / 4;
  double* Rh = dsm;                                           // [64, 32] beta (v - e k S)
  float* Vn = reinterpret_cast<float*>(Rh + kMaxChunk * C);   // [64, 32] v_new
  float* S = Vn + kMaxChunk * C;                              // [Dk, 32]
  float4* Qs = reinterpret_cast<float4*>(S + dk * C);         // [64, Dk / 4]
  float4* Ks = Qs + kMaxChunk * dk4;                          // [64, Dk / 4]
  float4* Ts = Ks + kMaxChunk * dk4;                          // [64, 16]
  float4* Ps = Ts + kMaxChunk * M4;                           // [64, 16]
  float* es = reinterpret_cast<float*>(Ps + kMaxChunk * M4);  // [64]
  float* ts = es + kMaxChunk;                                 // [64]
  float* bs = ts + kMaxChunk;                                 // [64]
  const int64_t b = blockIdx.z, h = blockIdx.y, hk = h / (Hv / Hk), c0 = static_cast<int64_t>(blockIdx.x) * C;
  const int64_t cols = Dv - c0 < C ? Dv - c0 : C, nchunks = (L + chunk - 1) / chunk;
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const bool active = lane < cols;
  float* Sg = state + (b * Hv + h) * Dk * Dv;  // [Dk, Dv]
  for (int idx = tid; idx < dk * C; idx += kChunkThreads) {
    const int x = idx / C, cc = idx % C;
    S[idx] = cc < cols ? Sg[x * Dv + c0 + cc] : 0.0f;
  }
  for (int idx = tid; idx < kMaxChunk * C; idx += kChunkThreads) {
    Rh[idx] = 0.0;
    Vn[idx] = 0.0f;
  }
  for (int64_t ci = 0; ci < nchunks; ++ci) {
    const int64_t t0 = ci * chunk;
    const int n = static_cast<int>(L - t0 < chunk ? L - t0 : chunk), n4 = (n + 3) / 4;
    const float4* Tc = reinterpret_cast<const float4*>(Tg + ((b * Hv + h) * nchunks + ci) * kMaxChunk * kMaxChunk);
    const float4* Pc = reinterpret_cast<const float4*>(Pg + ((b * Hv + h) * nchunks + ci) * kMaxChunk * kMaxChunk);
    __syncthreads();  // the previous chunk is done with the staged rows, S and v_new
    for (int i = w; i < n; i += W) {
      const int64_t row = ((b * L + t0 + i) * Hk + hk) * Dk;
      const float4* qr = reinterpret_cast<const float4*>(q + row);
      const float4* kr = reinterpret_cast<const float4*>(k + row);
      for (int x = lane; x < dk4; x += 32) {
        Qs[i * dk4 + x] = qr[x];
        Ks[i * dk4 + x] = kr[x];
      }
    }
    for (int idx = tid; idx < n * M4; idx += kChunkThreads) {
      Ts[idx] = Tc[idx];
      Ps[idx] = Pc[idx];
    }
    if (tid < n) {
      const int64_t at = (b * Hv + h) * L + t0 + tid;
      es[tid] = eg[at];
      ts[tid] = tg[at];
      bs[tid] = beta[(b * L + t0 + tid) * Hv + h];
    }
    __syncthreads();
    // q_i S and k_i S for this lane's column, one pass over S.
    float qs[R], ks[R];
#pragma unroll
    for (int r = 0; r < R; ++r) qs[r] = ks[r] = 0.0f;
    for (int x = 0; x < dk4; ++x) {
      const float s0 = S[(4 * x) * C + lane], s1 = S[(4 * x + 1) * C + lane], s2 = S[(4 * x + 2) * C + lane],
                  s3 = S[(4 * x + 3) * C + lane];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = w + r * W;
        if (i >= n) continue;
        const float4 a = Qs[i * dk4 + x], c = Ks[i * dk4 + x];
        qs[r] += a.x * s0 + a.y * s1 + a.z * s2 + a.w * s3;
        ks[r] += c.x * s0 + c.y * s1 + c.z * s2 + c.w * s3;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = w + r * W;
      if (i >= n) continue;
      const double vi = active ? v[((b * L + t0 + i) * Hv + h) * Dv + c0 + lane] : 0.0;
      Rh[i * C + lane] = bs[i] * (vi - es[i] * static_cast<double>(ks[r]));
    }
    __syncthreads();
    // v_new = T (beta (v - e k S)) in f64.
    double vx[R];
#pragma unroll
    for (int r = 0; r < R; ++r) vx[r] = 0.0;
    for (int s4 = 0; s4 < n4; ++s4) {
      const double r0 = Rh[(4 * s4) * C + lane], r1 = Rh[(4 * s4 + 1) * C + lane], r2 = Rh[(4 * s4 + 2) * C + lane],
                   r3 = Rh[(4 * s4 + 3) * C + lane];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = w + r * W;
        if (i >= n || 4 * s4 > i) continue;
        const float4 t = Ts[i * M4 + s4];
        vx[r] += static_cast<double>(t.x) * r0 + static_cast<double>(t.y) * r1 + static_cast<double>(t.z) * r2 +
                 static_cast<double>(t.w) * r3;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = w + r * W;
      if (i < n) Vn[i * C + lane] = static_cast<float>(vx[r]);
    }
    __syncthreads();
    // o_i = e_i q_i S + sum_s P[i, s] v_new_s.
    float o[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = w + r * W;
      o[r] = i < n ? qs[r] * es[i] : 0.0f;
    }
    for (int s4 = 0; s4 < n4; ++s4) {
      const float u0 = Vn[(4 * s4) * C + lane], u1 = Vn[(4 * s4 + 1) * C + lane], u2 = Vn[(4 * s4 + 2) * C + lane],
                  u3 = Vn[(4 * s4 + 3) * C + lane];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = w + r * W;
        if (i >= n || 4 * s4 > i) continue;
        const float4 p = Ps[i * M4 + s4];
        o[r] += p.x * u0 + p.y * u1 + p.z * u2 + p.w * u3;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int i = w + r * W;
      if (i < n && active) out[((b * L + t0 + i) * Hv + h) * Dv + c0 + lane] = o[r];
    }
    // S <- exp(cum_last) S + sum_s tail_s k_s v_new_s^T. Each (x, lane) is read and written by its own
    // thread only; every read of S above came before the barrier that preceded v_new.
    const float decay = es[n - 1];
    for (int x0 = 8 * w; x0 < dk; x0 += 8 * W) {
      const bool hi = x0 + 4 < dk;
      float su[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) su[j] = (j < 4 || hi) ? S[(x0 + j) * C + lane] * decay : 0.0f;
      for (int s = 0; s < n; ++s) {
        const float vt = Vn[s * C + lane] * ts[s];
        const float4 a = Ks[s * dk4 + x0 / 4];
        su[0] += a.x * vt;
        su[1] += a.y * vt;
        su[2] += a.z * vt;
        su[3] += a.w * vt;
        if (hi) {
          const float4 c = Ks[s * dk4 + x0 / 4 + 1];
          su[4] += c.x * vt;
          su[5] += c.y * vt;
          su[6] += c.z * vt;
          su[7] += c.w * vt;
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j < 4 || hi) S[(x0 + j) * C + lane] = su[j];
      }
    }
  }
  __syncthreads();
  for (int idx = tid; idx < dk * C; idx += kChunkThreads) {
    const int x = idx / C, cc = idx % C;
    if (cc < cols) Sg[x * Dv + c0 + cc] = S[idx];
  }
}

}  // namespace tern::cuda::kernels
