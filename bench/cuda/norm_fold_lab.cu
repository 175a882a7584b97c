// Kernel lab: where should a batch-1 decode layer's two RMSNorms run? Qwen3-0.6B- and 8B-sized chains
// (per layer the q/k/v product, o_proj, the gated gate/up product and down, fresh weights per layer, 28
// and 36 layers; a warp per output row), each captured as one graph with programmatic dependent launch,
// in three forms:
//   A (as tern): each product writes its output; a one-block kernel adds the residual, writes the sum and
//     the normed row; the next product reads the normed row.
//   B (fold into the consumer): o_proj and down add the residual in their epilogue, write the sum and one
//     partial sum of squares per block; the next product's warps sum those partials in a fixed order and
//     normalise the sum row on the fly as they load it.
//   C (the producer's last block): o_proj and down as in B, then the last block to finish (a ticket)
//     sums the partials in a fixed order and writes the normed row; the next product is unchanged.
// Prints us per layer for each and the largest difference of the final residual row against A.
// Measured on an H100 on 2026-12-06 (bench/RESULTS.md): A is the fastest of the three at both sizes.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/cuda/norm_fold_lab.cu -o norm_fold_lab
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "lab.cuh"

namespace {

constexpr int WARPS = 4;  // warps per product block, a row each; a product of H rows has H / WARPS partial sums
constexpr float EPS = 1e-6f;

__device__ __forceinline__ float bfr(float v) { return __bfloat162float(__float2bfloat16(v)); }

// The row's inverse RMS from the producer's PARTS partial sums, in a fixed order (every warp alike).
// LDG: through the read-only path (the partials of an earlier kernel: every warp of a product reads the
// same few lines, which through L2 alone hot-spots one slice); else from L2 (written in this kernel).
template <int H, bool LDG>
__device__ __forceinline__ float inv_rms_from_parts(const float* parts) {
  constexpr int PARTS = H / WARPS;
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < PARTS / 32; ++i) s += LDG ? __ldg(parts + lane * (PARTS / 32) + i) : __ldcg(parts + lane * (PARTS / 32) + i);
  return rsqrtf(warp_sum(s) / H + EPS);
}

// The normed activation chunk: x (FOLD: the raw sum row, normed here with inv and gamma) as 8 f32.
template <bool FOLD>
__device__ __forceinline__ void x_chunk(const uint4* x, const uint4* gamma, int c, float inv, float* f) {
  unpack8(__ldg(x + c), f);  // written by an earlier kernel: the read-only path, as tern's GEMV
  if constexpr (FOLD) {
    float g[8];
    unpack8(__ldg(gamma + c), g);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = bfr(f[i] * inv * g[i]);
  }
}

// This lane's share of row w . x over K (K / 8 chunks, 4 loads in flight).
template <bool FOLD>
__device__ __forceinline__ float row_dot(const uint4* w, const uint4* x, const uint4* gamma, int K, float inv) {
  float acc = 0.0f;
  stream_row(w, 0, K / 8, [&](const uint4& a, int c) {
    float wf[8], xf[8];
    unpack8(a, wf);
    x_chunk<FOLD>(x, gamma, c, inv, xf);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc += wf[i] * xf[i];
  });
  return warp_sum(acc);
}

// The products that start a sub-layer (q/k/v; gate/up, GATED): x is the normed row (FOLD false) or the sum
// row with the producer's partials (FOLD true).
template <int H, bool FOLD, bool GATED>
__global__ void __launch_bounds__(WARPS * 32) head_product(const __nv_bfloat16* x, const float* parts,
                                                           const __nv_bfloat16* gamma, const __nv_bfloat16* w,
                                                           __nv_bfloat16* out, int N, int K) {
  pdl_wait();
  pdl_launch();
  const int n = blockIdx.x * WARPS + (threadIdx.x >> 5);
  const float inv = FOLD ? inv_rms_from_parts<H, true>(parts) : 1.0f;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* gv = reinterpret_cast<const uint4*>(gamma);
  const float a = row_dot<FOLD>(reinterpret_cast<const uint4*>(w + size_t(n) * K), xv, gv, K, inv);
  if constexpr (GATED) {
    const float b = row_dot<FOLD>(reinterpret_cast<const uint4*>(w + size_t(N + n) * K), xv, gv, K, inv);
    const float g = bfr(a), u = bfr(b);
    if ((threadIdx.x & 31) == 0) out[n] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  } else {
    if ((threadIdx.x & 31) == 0) out[n] = __float2bfloat16(a);
  }
}

// One-block add + RMSNorm (A): sum = res + delta, out = bf16(sum * inv * gamma); H / 8 threads.
template <int H>
__global__ void add_norm(const __nv_bfloat16* delta, __nv_bfloat16* res, const __nv_bfloat16* gamma,
                         __nv_bfloat16* out) {
  pdl_wait();
  pdl_launch();
  __shared__ float red[H / 8 / 32];
  const int c = threadIdx.x;
  float r[8], d[8], g[8];
  unpack8(reinterpret_cast<const uint4*>(res)[c], r);
  unpack8(reinterpret_cast<const uint4*>(delta)[c], d);
  unpack8(reinterpret_cast<const uint4*>(gamma)[c], g);
  __nv_bfloat16 s[8];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    s[i] = __float2bfloat16(r[i] + d[i]);
    r[i] = __bfloat162float(s[i]);
    ss += r[i] * r[i];
  }
  reinterpret_cast<uint4*>(res)[c] = *reinterpret_cast<uint4*>(s);
  ss = warp_sum(ss);
  if ((c & 31) == 0) red[c >> 5] = ss;
  __syncthreads();
  float t = 0.0f;
#pragma unroll
  for (int i = 0; i < H / 8 / 32; ++i) t += red[i];
  const float inv = rsqrtf(t / H + EPS);
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = __float2bfloat16(r[i] * inv * g[i]);
  reinterpret_cast<uint4*>(out)[c] = *reinterpret_cast<uint4*>(s);
}

// The products that end a sub-layer (o_proj, down) over x (K wide), H output rows. MODE 0 (A): out = the
// product. MODE 1 (B): res += the product, parts[block] = the block's sum of squares of res. MODE 2 (C):
// as B, then the last block writes normed = bf16(res * inv * gamma) and resets the ticket.
template <int H, int MODE>
__global__ void __launch_bounds__(WARPS * 32) tail_product(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                           __nv_bfloat16* out, __nv_bfloat16* res, float* parts,
                                                           unsigned* ticket, const __nv_bfloat16* gamma,
                                                           __nv_bfloat16* normed, int K) {
  pdl_wait();
  pdl_launch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = blockIdx.x * WARPS + warp;
  const float a = row_dot<false>(reinterpret_cast<const uint4*>(w + size_t(n) * K), reinterpret_cast<const uint4*>(x),
                                 nullptr, K, 1.0f);
  if constexpr (MODE == 0) {
    if (lane == 0) out[n] = __float2bfloat16(a);
    return;
  } else {
    __shared__ float sq[WARPS];
    __shared__ bool last;
    if (lane == 0) {
      const float s = bfr(__bfloat162float(res[n]) + bfr(a));
      res[n] = __float2bfloat16(s);
      sq[warp] = s * s;
      if constexpr (MODE == 2) __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = 0.0f;
#pragma unroll
      for (int i = 0; i < WARPS; ++i) t += sq[i];
      parts[blockIdx.x] = t;
      if constexpr (MODE == 2) {
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
      }
    }
    if constexpr (MODE == 2) {
      __syncthreads();
      if (!last) return;
      __threadfence();
      // Every warp sums the partials itself (no barrier); thread c writes chunks c, c + WARPS * 32, ...
      static_assert(H % (8 * WARPS * 32) == 0, "whole chunks a thread");
      constexpr int PER = H / 8 / (WARPS * 32);
      float r[PER][8], g[PER][8];
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int c = threadIdx.x + j * WARPS * 32;
        unpack8(__ldcg(reinterpret_cast<const uint4*>(res) + c), r[j]);
        unpack8(__ldg(reinterpret_cast<const uint4*>(gamma) + c), g[j]);
      }
      const float inv = inv_rms_from_parts<H, false>(parts);
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        __nv_bfloat16 o[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] = __float2bfloat16(r[j][i] * inv * g[j][i]);
        reinterpret_cast<uint4*>(normed)[threadIdx.x + j * WARPS * 32] = *reinterpret_cast<uint4*>(o);
      }
      if (threadIdx.x == 0) *ticket = 0;
    }
  }
}

struct Layer {
  __nv_bfloat16 *qkv, *o, *gu, *down, *g1, *g2;
};

template <int H, int QKV, int ATT, int FF, int LAYERS>
void run(const char* model, cudaStream_t s) {
  constexpr int PARTS = H / WARPS;
  auto alloc = [](size_t n) {
    __nv_bfloat16* p;
    CK(cudaMalloc(&p, n * sizeof(__nv_bfloat16)));
    return p;
  };
  std::vector<Layer> L(LAYERS);
  unsigned seed = 1;
  for (Layer& l : L) {
    l.qkv = alloc(size_t(QKV) * H), l.o = alloc(size_t(H) * ATT), l.gu = alloc(size_t(2 * FF) * H);
    l.down = alloc(size_t(H) * FF), l.g1 = alloc(H), l.g2 = alloc(H);
    fill_random<<<512, 256, 0, s>>>(l.qkv, size_t(QKV) * H, seed++, 0.05f);
    fill_random<<<512, 256, 0, s>>>(l.o, size_t(H) * ATT, seed++, 0.03f);
    fill_random<<<512, 256, 0, s>>>(l.gu, size_t(2 * FF) * H, seed++, 0.05f);
    fill_random<<<512, 256, 0, s>>>(l.down, size_t(H) * FF, seed++, 0.03f);
    fill_random<<<4, 256, 0, s>>>(l.g1, H, seed++, 0.5f);
    fill_random<<<4, 256, 0, s>>>(l.g2, H, seed++, 0.5f);
  }
  __nv_bfloat16 *res = alloc(H), *res0 = alloc(H), *normed = alloc(H), *qkv = alloc(QKV), *delta = alloc(H),
                *act = alloc(FF);
  float* parts;
  unsigned* ticket;
  CK(cudaMalloc(&parts, 2 * PARTS * sizeof(float)));
  CK(cudaMalloc(&ticket, sizeof(unsigned)));
  CK(cudaMemset(ticket, 0, sizeof(unsigned)));
  fill_random<<<4, 256, 0, s>>>(res0, H, 999, 1.0f);
  CK(cudaStreamSynchronize(s));

  // Every mode starts from A's add_norm over a zero delta, so the first layer's q/k/v product reads
  // `normed` in each; B folds from the second norm on.
  auto chain = [&](int mode) {
    CK(cudaMemcpyAsync(res, res0, H * 2, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemsetAsync(delta, 0, H * 2, s));
    launch(add_norm<H>, 1, H / 8, s, (const __nv_bfloat16*)delta, res, (const __nv_bfloat16*)L[0].g1, normed);
    for (int i = 0; i < LAYERS; ++i) {
      const Layer& l = L[i];
      const bool fold_first = mode == 1 && i > 0;
      if (fold_first)
        launch(head_product<H, true, false>, QKV / WARPS, WARPS * 32, s, (const __nv_bfloat16*)res,
               (const float*)parts + PARTS, (const __nv_bfloat16*)l.g1, (const __nv_bfloat16*)l.qkv, qkv, QKV, H);
      else
        launch(head_product<H, false, false>, QKV / WARPS, WARPS * 32, s, (const __nv_bfloat16*)normed,
               (const float*)nullptr, (const __nv_bfloat16*)nullptr, (const __nv_bfloat16*)l.qkv, qkv, QKV, H);
      // o_proj over the first ATT outputs of q/k/v (the stand-in for the attention output).
      if (mode == 0) {
        launch(tail_product<H, 0>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)qkv, (const __nv_bfloat16*)l.o,
               delta, res, parts, ticket, (const __nv_bfloat16*)l.g2, normed, ATT);
        launch(add_norm<H>, 1, H / 8, s, (const __nv_bfloat16*)delta, res, (const __nv_bfloat16*)l.g2, normed);
      } else if (mode == 1) {
        launch(tail_product<H, 1>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)qkv, (const __nv_bfloat16*)l.o,
               delta, res, parts, ticket, (const __nv_bfloat16*)l.g2, normed, ATT);
      } else {
        launch(tail_product<H, 2>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)qkv, (const __nv_bfloat16*)l.o,
               delta, res, parts, ticket, (const __nv_bfloat16*)l.g2, normed, ATT);
      }
      if (mode == 1)
        launch(head_product<H, true, true>, FF / WARPS, WARPS * 32, s, (const __nv_bfloat16*)res, (const float*)parts,
               (const __nv_bfloat16*)l.g2, (const __nv_bfloat16*)l.gu, act, FF, H);
      else
        launch(head_product<H, false, true>, FF / WARPS, WARPS * 32, s, (const __nv_bfloat16*)normed,
               (const float*)nullptr, (const __nv_bfloat16*)nullptr, (const __nv_bfloat16*)l.gu, act, FF, H);
      const __nv_bfloat16* g_next = i + 1 < LAYERS ? L[i + 1].g1 : L[0].g1;
      if (mode == 0) {
        launch(tail_product<H, 0>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)act, (const __nv_bfloat16*)l.down,
               delta, res, parts, ticket, g_next, normed, FF);
        launch(add_norm<H>, 1, H / 8, s, (const __nv_bfloat16*)delta, res, g_next, normed);
      } else if (mode == 1) {
        launch(tail_product<H, 1>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)act, (const __nv_bfloat16*)l.down,
               delta, res, parts + PARTS, ticket, g_next, normed, FF);
      } else {
        launch(tail_product<H, 2>, H / WARPS, WARPS * 32, s, (const __nv_bfloat16*)act, (const __nv_bfloat16*)l.down,
               delta, res, parts, ticket, g_next, normed, FF);
      }
    }
  };
  const char* names[3] = {"A: norm kernels (as tern)", "B: folded into the next product",
                          "C: the producer's last block"};
  std::vector<float> ref(H);
  for (int round = 0; round < 2; ++round) {
    for (int mode = 0; mode < 3; ++mode) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      chain(mode);
      CK(cudaStreamEndCapture(s, &g));
      const double us = replay_us(g, s);
      std::vector<__nv_bfloat16> h(H);
      CK(cudaMemcpy(h.data(), res, H * 2, cudaMemcpyDeviceToHost));
      double worst = 0.0, scale = 0.0;
      for (int i = 0; i < H; ++i) {
        const float v = __bfloat162float(h[i]);
        if (mode == 0) ref[i] = v;
        worst = std::fmax(worst, std::fabs(v - ref[i]));
        scale = std::fmax(scale, std::fabs(ref[i]));
      }
      std::printf("%s round %d  %-36s %8.1f us a step  %6.2f us a layer  max |res - A| %.3g (max |A| %.3g)\n", model, round,
                  names[mode], us, us / LAYERS, worst, scale);
    }
  }
  for (Layer& l : L) {
    for (__nv_bfloat16* p : {l.qkv, l.o, l.gu, l.down, l.g1, l.g2}) CK(cudaFree(p));
  }
  for (__nv_bfloat16* p : {res, res0, normed, qkv, delta, act}) CK(cudaFree(p));
  CK(cudaFree(parts));
  CK(cudaFree(ticket));
}

}  // namespace

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run<1024, 4096, 2048, 3072, 28>("0.6B", s);
  run<4096, 6144, 4096, 12288, 36>("8B", s);
  return 0;
}
