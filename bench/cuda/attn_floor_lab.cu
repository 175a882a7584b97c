// Kernel lab: what does a batch-1 decode attention read over a short span cost at least, inside a step?
// tern's flash-decoding read adds 7-8.5 us a layer at spans of 128-256 keys (kernel traces, H200,
// 2026-12-04/05) for about 1 MB of K/V. Here a plain CUDA-core read with the fewest steps: one block (NW
// warps), or a cluster of S blocks, per kv head; a lane per key for the scores (its K row in registers,
// the G query rows of the head in shared memory), a warp-wide online softmax per 32 keys, P.V with a lane
// per 4 value dims, the warps merged once in shared memory and the blocks through distributed shared
// memory. It runs between a q/k/v-sized and an o_proj-sized GEMV (fresh
// weights and K/V per layer), one graph with programmatic dependent launch, against the same chain with
// an empty kernel or nothing in its place:
//   none:  GEMV, GEMV (the chain without a third launch)
//   empty: GEMV, an empty kernel, GEMV (what any launch in between costs)
//   read:  GEMV, the read (NW warps a block, S blocks a kv head as a thread-block cluster), GEMV
// us a layer, and what each read adds over "none". Each variant's output for layer 0 is checked against a
// host reference first.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/cuda/attn_floor_lab.cu -o attn_floor_lab
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "lab.cuh"

namespace {

constexpr int D = 128;  // head dim

// out[h G + g] = softmax(scale q[h G + g] . K[h]^T) V[h] for the G query heads of kv head h = blockIdx.x / S;
// q [Hkv G, D], k and v [Hkv, L_all, D] bf16. Keys k0 + base + lane of the block's range [k0, k0 + L), for
// base = 32 warp, 32 (warp + NW), ...
// S > 1: the S blocks of a thread-block cluster split the keys of a kv head into S ranges; each merges its
// warps, then block r writes value dims [r D / S, (r + 1) D / S) of every query row from all S blocks'
// parts through distributed shared memory.
template <int G, int NW, int S>
__global__ void __launch_bounds__(NW * 32) attn_read(const __nv_bfloat16* __restrict__ q,
                                                     const __nv_bfloat16* __restrict__ k,
                                                     const __nv_bfloat16* __restrict__ v,
                                                     __nv_bfloat16* __restrict__ out, int L_all, float scale) {
  pdl_wait();
  pdl_launch();
  __shared__ float qs[G][D];
  __shared__ float mw[NW][G], lw[NW][G];
  __shared__ float ow[NW][G][D];
  __shared__ float mb[G], lb[G];  // this block's merged max and sum (ow[0] holds its merged values)
  const int h = blockIdx.x / S, r = blockIdx.x % S, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k0 = r * ((L_all + S - 1) / S), L = min(L_all, k0 + (L_all + S - 1) / S) - k0;
  for (int i = threadIdx.x; i < G * D; i += NW * 32) qs[i / D][i % D] = __bfloat162float(q[h * G * D + i]) * scale;
  __syncthreads();
  const __nv_bfloat16* kh = k + (static_cast<size_t>(h) * L_all + k0) * D;
  const __nv_bfloat16* vh = v + (static_cast<size_t>(h) * L_all + k0) * D;
  float m[G], l[G], o[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) o[g][e] = 0.0f;
  }
  for (int base = warp * 32; base < L; base += NW * 32) {
    const int j = base + lane;
    const bool valid = j < L;
    uint4 kr[D / 8];
    const uint4* krow = reinterpret_cast<const uint4*>(kh + static_cast<size_t>(valid ? j : base) * D);
#pragma unroll
    for (int c = 0; c < D / 8; ++c) kr[c] = __ldg(krow + c);
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(&kr[c]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 kf = __bfloat1622float2(p2[e]);
#pragma unroll
        for (int g = 0; g < G; ++g) s[g] += qs[g][8 * c + 2 * e] * kf.x + qs[g][8 * c + 2 * e + 1] * kf.y;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float mn = fmaxf(m[g], warp_max(valid ? s[g] : -INFINITY));
      const float alpha = __expf(m[g] - mn);
      s[g] = valid ? __expf(s[g] - mn) : 0.0f;
      l[g] = l[g] * alpha + warp_sum(s[g]);
#pragma unroll
      for (int e = 0; e < 4; ++e) o[g][e] *= alpha;
      m[g] = mn;
    }
    const int nk = min(32, L - base);
    const uint2* vrow = reinterpret_cast<const uint2*>(vh + static_cast<size_t>(base) * D) + lane;
#pragma unroll 8
    for (int kk = 0; kk < nk; ++kk) {
      const uint2 vv = __ldg(vrow + kk * (D / 4));
      const float2 v01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vv.x));
      const float2 v23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vv.y));
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = __shfl_sync(0xffffffffu, s[g], kk);
        o[g][0] += p * v01.x, o[g][1] += p * v01.y, o[g][2] += p * v23.x, o[g][3] += p * v23.y;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) mw[warp][g] = m[g], lw[warp][g] = l[g];
#pragma unroll
    for (int e = 0; e < 4; ++e) ow[warp][g][4 * lane + e] = o[g][e];
  }
  __syncthreads();
  // The warps merged: unnormalised values into ow[0], with the block's max and sum in mb, lb.
  float merged[(G * D + NW * 32 - 1) / (NW * 32)];
#pragma unroll
  for (int t = 0; t < (G * D + NW * 32 - 1) / (NW * 32); ++t) {
    const int i = threadIdx.x + t * NW * 32;
    if (i >= G * D) break;
    const int g = i / D, d = i % D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; ++w) M = fmaxf(M, mw[w][g]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float f = mw[w][g] == -INFINITY ? 0.0f : __expf(mw[w][g] - M);
      num += f * ow[w][g][d], den += f * lw[w][g];
    }
    if constexpr (S == 1) {
      out[h * G * D + i] = __float2bfloat16(num / den);
    } else {
      merged[t] = num;
      if (d == 0) mb[g] = M, lb[g] = den;
    }
  }
  if constexpr (S > 1) {
    namespace cg = cooperative_groups;
    __syncthreads();  // every thread's reads of ow are done before ow[0] is overwritten
#pragma unroll
    for (int t = 0; t < (G * D + NW * 32 - 1) / (NW * 32); ++t) {
      const int i = threadIdx.x + t * NW * 32;
      if (i < G * D) ow[0][i / D][i % D] = merged[t];
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    constexpr int DS = D / S;  // the value dims this block writes
    for (int i = threadIdx.x; i < G * DS; i += NW * 32) {
      const int g = i / DS, d = r * DS + i % DS;
      float mp[S], M = -INFINITY;
#pragma unroll
      for (int p = 0; p < S; ++p) M = fmaxf(M, mp[p] = *cluster.map_shared_rank(&mb[g], p));
      float num = 0.0f, den = 0.0f;
#pragma unroll
      for (int p = 0; p < S; ++p) {
        const float f = mp[p] == -INFINITY ? 0.0f : __expf(mp[p] - M);
        num += f * *cluster.map_shared_rank(&ow[0][g][d], p);
        den += f * *cluster.map_shared_rank(&lb[g], p);
      }
      out[(h * G + g) * D + d] = __float2bfloat16(num / den);
    }
    cluster.sync();  // peers may still read this block's shared memory
  }
}

__global__ void empty_kernel() {
  pdl_wait();
  pdl_launch();
}

// y[n] = w[n] . x for bf16 w [N, K], x [K]; a warp a row, 8 warps a block, 4 loads in flight.
__global__ void __launch_bounds__(256) gemv(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                                            __nv_bfloat16* __restrict__ y, int N, int K) {
  pdl_wait();
  pdl_launch();
  const int n = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (n >= N) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<size_t>(n) * K);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc = 0.0f;
  stream_row(wr, 0, K / 8, [&](const uint4& a, int c) { acc += dot8(a, __ldg(xr + c)); });
  acc = warp_sum(acc);
  if (lane == 0) y[n] = __float2bfloat16(acc);
}

struct Model {
  const char* name;
  int hq, hkv, hidden, layers;
};

// attn_read<G, NW, S> over hkv kv heads: S blocks a head as clusters of S, with programmatic dependent launch.
template <int G, int NW, int S>
void launch_read(cudaStream_t s, int hkv, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                 __nv_bfloat16* out, int L) {
  cudaLaunchAttribute at[2]{};
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = S, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(hkv * S);
  cfg.blockDim = dim3(NW * 32);
  cfg.stream = s;
  cfg.attrs = at;
  cfg.numAttrs = S > 1 ? 2 : 1;
  CK(cudaLaunchKernelEx(&cfg, attn_read<G, NW, S>, q, k, v, out, L, 0.0883883f));
}

// Every read variant the chains time: NW warps a block, S blocks a kv head.
struct Variant {
  const char* name;
  int nw, s;
};
constexpr Variant kVariants[] = {{"NW=4 S=1", 4, 1}, {"NW=8 S=1", 8, 1}, {"NW=4 S=2", 4, 2}, {"NW=4 S=4", 4, 4},
                                 {"NW=8 S=4", 8, 4}};

template <int G>
void launch_variant(const Variant& vr, cudaStream_t s, int hkv, const __nv_bfloat16* q, const __nv_bfloat16* k,
                    const __nv_bfloat16* v, __nv_bfloat16* out, int L) {
  if (vr.nw == 4 && vr.s == 1) launch_read<G, 4, 1>(s, hkv, q, k, v, out, L);
  if (vr.nw == 8 && vr.s == 1) launch_read<G, 8, 1>(s, hkv, q, k, v, out, L);
  if (vr.nw == 4 && vr.s == 2) launch_read<G, 4, 2>(s, hkv, q, k, v, out, L);
  if (vr.nw == 4 && vr.s == 4) launch_read<G, 4, 4>(s, hkv, q, k, v, out, L);
  if (vr.nw == 8 && vr.s == 4) launch_read<G, 8, 4>(s, hkv, q, k, v, out, L);
}

// The read of layer 0 against a host reference, then the chains' us a layer.
template <int G>
void run(const Model& md, cudaStream_t s) {
  const int qkv_rows = (md.hq + 2 * md.hkv) * D, o_in = md.hq * D;
  for (int L : {128, 256}) {
    const size_t kv = static_cast<size_t>(md.hkv) * L * D;
    std::vector<__nv_bfloat16*> wq(md.layers), wo(md.layers), ks(md.layers), vs(md.layers);
    for (int i = 0; i < md.layers; ++i) {
      CK(cudaMalloc(&wq[i], size_t(qkv_rows) * md.hidden * 2));
      CK(cudaMalloc(&wo[i], size_t(md.hidden) * o_in * 2));
      CK(cudaMalloc(&ks[i], kv * 2));
      CK(cudaMalloc(&vs[i], kv * 2));
      CK(cudaMemsetAsync(wq[i], 0, size_t(qkv_rows) * md.hidden * 2, s));
      CK(cudaMemsetAsync(wo[i], 0, size_t(md.hidden) * o_in * 2, s));
      fill_random<<<256, 256, 0, s>>>(ks[i], kv, 2 * i + 1, 1.0f);
      fill_random<<<256, 256, 0, s>>>(vs[i], kv, 2 * i + 2, 1.0f);
    }
    __nv_bfloat16 *x, *qkv, *att;
    CK(cudaMalloc(&x, md.hidden * 2));
    CK(cudaMalloc(&qkv, qkv_rows * 2));
    CK(cudaMalloc(&att, o_in * 2));
    CK(cudaMemsetAsync(x, 0, md.hidden * 2, s));
    fill_random<<<16, 256, 0, s>>>(qkv, qkv_rows, 99, 1.0f);
    // The host reference of layer 0's read of a random q, then each variant against it.
    std::vector<__nv_bfloat16> hq(o_in), hk(kv), hv(kv), ho(o_in);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(hq.data(), qkv, o_in * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hk.data(), ks[0], kv * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), vs[0], kv * 2, cudaMemcpyDeviceToHost));
    std::vector<double> ref(o_in);
    for (int hh = 0; hh < md.hq; ++hh) {
      const int kvh = hh / G;
      std::vector<double> sc(L);
      double mx = -1e300;
      for (int j = 0; j < L; ++j) {
        double a = 0.0;
        for (int d = 0; d < D; ++d)
          a += double(__bfloat162float(hq[hh * D + d])) * __bfloat162float(hk[(size_t(kvh) * L + j) * D + d]);
        sc[j] = a * 0.0883883;
        mx = std::fmax(mx, sc[j]);
      }
      double den = 0.0;
      for (int j = 0; j < L; ++j) den += sc[j] = std::exp(sc[j] - mx);
      for (int d = 0; d < D; ++d) {
        double num = 0.0;
        for (int j = 0; j < L; ++j) num += sc[j] * __bfloat162float(hv[(size_t(kvh) * L + j) * D + d]);
        ref[hh * D + d] = num / den;
      }
    }
    std::printf("%s, %d keys: max abs error against the host (values in [-1, 1]):", md.name, L);
    for (const Variant& vr : kVariants) {
      CK(cudaMemsetAsync(att, 0xff, o_in * 2, s));  // NaNs: a row the read misses shows
      launch_variant<G>(vr, s, md.hkv, qkv, ks[0], vs[0], att, L);
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(ho.data(), att, o_in * 2, cudaMemcpyDeviceToHost));
      double worst = 0.0;
      for (int i = 0; i < o_in; ++i) {
        const double e = std::fabs(ref[i] - __bfloat162float(ho[i]));
        worst = std::isnan(e) ? INFINITY : std::fmax(worst, e);
      }
      std::printf("  %s %.2e", vr.name, worst);
    }
    std::printf("\n");
    constexpr int kV = sizeof(kVariants) / sizeof(kVariants[0]);
    double us[2 + kV];
    for (int variant = 0; variant < 2 + kV; ++variant) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < md.layers; ++i) {
        launch(gemv, (qkv_rows + 7) / 8, 256, s, (const __nv_bfloat16*)wq[i], (const __nv_bfloat16*)x, qkv, qkv_rows,
               md.hidden);
        if (variant == 1) launch(empty_kernel, 1, 32, s);
        if (variant >= 2) launch_variant<G>(kVariants[variant - 2], s, md.hkv, qkv, ks[i], vs[i], att, L);
        launch(gemv, (md.hidden + 7) / 8, 256, s, (const __nv_bfloat16*)wo[i], (const __nv_bfloat16*)att, x,
               md.hidden, o_in);
      }
      CK(cudaStreamEndCapture(s, &g));
      us[variant] = replay_us(g, s) / md.layers;
    }
    std::printf("%s, %d keys, us a layer: none %.2f  empty %.2f", md.name, L, us[0], us[1]);
    for (int v = 0; v < kV; ++v) std::printf("  %s %.2f (+%.2f)", kVariants[v].name, us[2 + v], us[2 + v] - us[0]);
    std::printf("\n");
    for (int i = 0; i < md.layers; ++i) {
      for (__nv_bfloat16* p : {wq[i], wo[i], ks[i], vs[i]}) CK(cudaFree(p));
    }
    for (__nv_bfloat16* p : {x, qkv, att}) CK(cudaFree(p));
  }
}

}  // namespace

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run<2>({"Qwen3-0.6B (16 q, 8 kv heads)", 16, 8, 1024, 28}, s);
  run<4>({"Qwen3-8B (32 q, 8 kv heads)", 32, 8, 4096, 36}, s);
  run<8>({"Qwen3-30B-A3B (32 q, 4 kv heads)", 32, 4, 2048, 48}, s);
  return 0;
}
