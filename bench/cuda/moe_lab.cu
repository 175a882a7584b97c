// Kernel lab: the routed experts of a batch-1 decode step at Qwen3-30B-A3B shapes (hidden 2048,
// moe_intermediate 768, top-8), where tern's gate/up and down products run at 2-3 TB/s against a copy
// rate of about 4.2. A chain of L layers, each layer's gate/up then down product over its own 8 routed
// experts (fresh weights per layer, far more than L2 holds), captured as one graph with programmatic
// dependent launch, as tern's compiled decode runs them. us per layer, for:
//   tern:      tern's kernels (kernels/moe.cuh: moe_gate_up_kernel, 8 loads in flight, then
//              moe_down_kernel), included as they are
//   lab gate/up variants (down as tern's):
//     W warps per row pair: each intermediate row's gate and up dots split over W warps (K / W each)
//     together:  a warp issues its gate and its up loads at once (one round trip, not two)
//     B blocks an SM: __launch_bounds__ minimum (768 blocks of 8 warps against 132 SMs x B slots:
//              at 4 an SM the grid is 1.45 waves)
//   stream:    the same bytes read by two streaming kernels of the same grids (no dots): the chain's
//              ceiling for these shapes
//   lab down, ahead: tern's down product, whose blocks first ask L2 for their slots' rows
//              (cp.async.bulk.prefetch.L2) before the grid wait -- the expert ids are written two launches
//              back -- so the rows arrive while the gate/up product streams; with gate/up loads that
//              leave L2 first (evict-first), so that stream does not push them out, or without
//   lab down, not ahead: the same kernel without the prefetch (its control)
// Each lab variant's outputs are checked against tern's kernels on layer 0 (max |difference|).
// Build: nvcc -O3 -std=c++20 -arch=sm_90 -I. bench/cuda/moe_lab.cu -o moe_lab   (from the repository root)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/cuda/lab.cuh"
#include "tern/backend/cuda/kernels/moe.cuh"

namespace k = tern::cuda::kernels;

constexpr int H = 2048, I = 768, TOPK = 8, E = 16, L = 24;

// 16 bytes of weights past L1 and first out of L2.
__device__ __forceinline__ uint4 load_evict_first16(const uint4* p) {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// h[p, i] = silu(gate_e[i] . x) * (up_e[i] . x), e = experts[p]; W warps per i (K split in W parts,
// summed through shared memory in warp order), TOGETHER: the gate and up loads of a part issued at once,
// EVICT_FIRST (with TOGETHER): those loads leave L2 first.
template <int W, bool TOGETHER, int MINB, bool EVICT_FIRST = false>
__global__ void __launch_bounds__(256, MINB)
    gate_up_lab(const __nv_bfloat16* __restrict__ x, const int32_t* __restrict__ experts,
                const __nv_bfloat16* __restrict__ gate_up, float* __restrict__ h) {
  k::grid_dependency_wait();
  constexpr int kRows = 8 / W;  // intermediate rows per block
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * kRows + warp / W, part = warp % W, p = blockIdx.y;
  const int e = experts[p];
  constexpr int kChunks = H / 8 / W;  // 16-byte chunks of this warp's part of a row
  constexpr int kPer = kChunks / 32;  // per lane
  const uint4* g = reinterpret_cast<const uint4*>(gate_up + (static_cast<int64_t>(e) * 2 * I + i) * H) + part * kChunks;
  const uint4* u = g + static_cast<int64_t>(I) * H / 8;
  const __nv_bfloat16* xr = x + part * kChunks * 8;
  float gs = 0.0f, us = 0.0f;
  if constexpr (TOGETHER) {
    uint4 gw[kPer], uw[kPer];
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      if constexpr (EVICT_FIRST) {
        gw[c] = load_evict_first16(g + lane + 32 * c), uw[c] = load_evict_first16(u + lane + 32 * c);
      } else {
        gw[c] = k::load_stream16(g + lane + 32 * c), uw[c] = k::load_stream16(u + lane + 32 * c);
      }
    }
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      float wg[8], wu[8], xf[8];
      k::bf16x8_to_f32(gw[c], wg);
      k::bf16x8_to_f32(uw[c], wu);
      k::load_x8<false>(xr, lane + 32 * c, xf);
#pragma unroll
      for (int t = 0; t < 8; ++t) gs += wg[t] * xf[t], us += wu[t] * xf[t];
    }
  } else {
    gs = k::lane_dot<kPer < 8 ? kPer : 8, __nv_bfloat16, true>(reinterpret_cast<const __nv_bfloat16*>(g), xr,
                                                               kChunks * 8, lane);
    us = k::lane_dot<kPer < 8 ? kPer : 8, __nv_bfloat16, true>(reinterpret_cast<const __nv_bfloat16*>(u), xr,
                                                               kChunks * 8, lane);
  }
  gs = k::warp_sum(gs), us = k::warp_sum(us);
  if constexpr (W == 1) {
    if (lane == 0) h[p * I + i] = gs / (1.0f + expf(-gs)) * us;
  } else {
    __shared__ float sg[8], su[8];
    if (lane == 0) sg[warp] = gs, su[warp] = us;
    __syncthreads();
    if (part == 0 && lane == 0) {
      float a = 0.0f, b = 0.0f;
      for (int w = 0; w < W; ++w) a += sg[warp + w], b += su[warp + w];
      h[p * I + i] = a / (1.0f + expf(-a)) * b;
    }
  }
}

// tern's moe_down_kernel for one token (out[n] = sum_j weights[j] down_e[n] . h[j], a block an output, a
// warp a slot), whose blocks, when AHEAD, first ask L2 for their slots' rows.
template <bool AHEAD>
__global__ void __launch_bounds__(256)
    down_lab(const float* __restrict__ h, const int32_t* __restrict__ experts, const float* __restrict__ weights,
             const __nv_bfloat16* __restrict__ down, __nv_bfloat16* __restrict__ out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = blockIdx.x;
  if (AHEAD && lane == 0 && warp < TOPK) {
    const void* row = down + (static_cast<int64_t>(experts[warp]) * H + n) * I;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(I * 2) : "memory");
  }
  k::grid_dependency_wait();
  float acc = 0.0f;
  for (int j = warp; j < TOPK; j += 8)
    acc += weights[j] * k::lane_dot<4, float, true>(down + (static_cast<int64_t>(experts[j]) * H + n) * I, h + j * I, I, lane);
  __shared__ float part[8];
  acc = k::warp_sum(acc);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < 8; ++w) sum += part[w];
    out[n] = __float2bfloat16(sum);
  }
}

// Reads `n16` 16-byte chunks from w (8 in flight per lane) and writes one word a block (the chain's
// dependency), as a product of the same grid would.
__global__ void __launch_bounds__(256) stream_read(const uint4* __restrict__ w, int64_t n16, float* __restrict__ out) {
  k::grid_dependency_wait();
  const int64_t per_block = n16 / gridDim.x;
  const uint4* b = w + blockIdx.x * per_block;
  uint32_t acc = 0;
  for (int64_t c = threadIdx.x; c < per_block; c += 256 * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = c + 256 * u < per_block ? k::load_stream16(b + c + 256 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = 1.0f;  // keeps the loads
}

__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t v = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    v ^= v >> 15, v *= 2246822519u, v ^= v >> 13;
    p[i] = __float2bfloat16((static_cast<float>(v & 0xffff) / 65536.0f - 0.5f) * scale);
  }
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int64_t gu_n = static_cast<int64_t>(E) * 2 * I * H, dn_n = static_cast<int64_t>(E) * H * I;
  std::vector<__nv_bfloat16*> gu(L), dn(L);
  std::vector<int32_t*> ex(L);
  std::vector<float*> wts(L);
  std::mt19937 rng(7);
  for (int l = 0; l < L; ++l) {
    CK(cudaMalloc(&gu[l], gu_n * 2));
    CK(cudaMalloc(&dn[l], dn_n * 2));
    fill_bf16<<<1024, 256, 0, s>>>(gu[l], gu_n, 11 + l, 0.05f);
    fill_bf16<<<1024, 256, 0, s>>>(dn[l], dn_n, 1011 + l, 0.07f);
    std::vector<int32_t> pool(E);
    for (int e = 0; e < E; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<float> w(TOPK, 1.0f / TOPK);
    CK(cudaMalloc(&ex[l], TOPK * 4));
    CK(cudaMalloc(&wts[l], TOPK * 4));
    CK(cudaMemcpy(ex[l], pool.data(), TOPK * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(wts[l], w.data(), TOPK * 4, cudaMemcpyHostToDevice));
  }
  __nv_bfloat16* x;  // x[l] is layer l's input, x[l + 1] its output
  float *h, *sink;
  CK(cudaMalloc(&x, (L + 1) * H * 2));
  CK(cudaMalloc(&h, TOPK * I * 4));
  CK(cudaMalloc(&sink, 4096 * 4));
  fill_bf16<<<8, 256, 0, s>>>(x, H, 5, 2.0f);
  CK(cudaStreamSynchronize(s));

  // tern's two kernels for layer l, as its decode launches them for one token (weights past L1).
  const dim3 up_grid(I / 8, TOPK);
  auto tern_up = [&](int l) {
    launch(k::moe_gate_up_kernel<false, 8, true>, up_grid, 256, s, static_cast<const __nv_bfloat16*>(x + l * H),
           static_cast<const int32_t*>(ex[l]), int64_t{TOPK}, static_cast<const __nv_bfloat16*>(gu[l]), int64_t{E},
           int64_t{H}, int64_t{I}, h);
  };
  auto tern_down = [&](int l) {
    launch(k::moe_down_kernel<4, __nv_bfloat16, true>, dim3(H, 1), 256, s, static_cast<const float*>(h),
           static_cast<const int32_t*>(ex[l]), static_cast<const float*>(wts[l]), int64_t{TOPK},
           static_cast<const __nv_bfloat16*>(dn[l]), int64_t{E}, int64_t{H}, int64_t{I}, x + (l + 1) * H);
  };

  // One graph of L layers of `layer`, us per layer.
  auto chain_us = [&](auto&& layer) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < L; ++l) layer(l);
    CK(cudaStreamEndCapture(s, &g));
    return replay_us(g, s) / L;
  };
  // h after layer 0's gate/up, for the checks.
  auto h_of = [&](auto&& up) {
    up(0);
    CK(cudaStreamSynchronize(s));
    std::vector<float> v(TOPK * I);
    CK(cudaMemcpy(v.data(), h, v.size() * 4, cudaMemcpyDeviceToHost));
    return v;
  };
  const std::vector<float> want = h_of(tern_up);

  const double mb_up = TOPK * 2.0 * I * H * 2 / 1e6, mb_down = TOPK * 1.0 * H * I * 2 / 1e6;
  std::printf("Qwen3-30B-A3B experts, batch 1: gate/up %.1f MB + down %.1f MB a layer, %d layers a graph\n", mb_up,
              mb_down, L);
  std::printf("| chain | us a layer | GB/s |\n|---|---|---|\n");
  auto report = [&](const char* name, double us) {
    std::printf("| %s | %.2f | %.0f |\n", name, us, (mb_up + mb_down) * 1e3 / us);
  };
  report("tern (gate/up 8 loads in flight, then down)", chain_us([&](int l) {
           tern_up(l);
           tern_down(l);
         }));

  auto variant = [&](const char* name, auto kern, int warps_per_row) {
    const dim3 grid(I / (8 / warps_per_row), TOPK);
    auto up = [&](int l) {
      launch(kern, grid, 256, s, static_cast<const __nv_bfloat16*>(x + l * H), static_cast<const int32_t*>(ex[l]),
             static_cast<const __nv_bfloat16*>(gu[l]), h);
    };
    const std::vector<float> got = h_of(up);
    double diff = 0.0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    char label[160];
    std::snprintf(label, sizeof label, "%s (h max |diff| %.1e)", name, diff);
    report(label, chain_us([&](int l) {
             up(l);
             tern_down(l);
           }));
  };
  variant("lab 1 warp a row, 8 loads, 4 blocks an SM", gate_up_lab<1, false, 4>, 1);
  variant("lab 1 warp a row, together, 4 blocks an SM", gate_up_lab<1, true, 4>, 1);
  variant("lab 1 warp a row, 8 loads, 6 blocks an SM", gate_up_lab<1, false, 6>, 1);
  variant("lab 2 warps a row, together, 4 blocks an SM", gate_up_lab<2, true, 4>, 2);
  variant("lab 2 warps a row, together, 6 blocks an SM", gate_up_lab<2, true, 6>, 2);
  variant("lab 4 warps a row, together, 6 blocks an SM", gate_up_lab<4, true, 6>, 4);
  variant("lab 8 warps a row, together, 8 blocks an SM", gate_up_lab<8, true, 8>, 8);

  // The down product asking L2 for its rows before its grid wait, after tern's or an evict-first gate/up;
  // layer 0's output checked against tern's pair.
  auto lab_down = [&](auto kern) {
    return [&, kern](int l) {
      launch(kern, dim3(H, 1), 256, s, static_cast<const float*>(h), static_cast<const int32_t*>(ex[l]),
             static_cast<const float*>(wts[l]), static_cast<const __nv_bfloat16*>(dn[l]), x + (l + 1) * H);
    };
  };
  auto evict_first_up = [&](int l) {
    launch(gate_up_lab<1, true, 4, true>, dim3(I / 8, TOPK), 256, s, static_cast<const __nv_bfloat16*>(x + l * H),
           static_cast<const int32_t*>(ex[l]), static_cast<const __nv_bfloat16*>(gu[l]), h);
  };
  auto out0 = [&](auto&& up, auto&& down) {  // layer 0's output
    up(0);
    down(0);
    CK(cudaStreamSynchronize(s));
    std::vector<__nv_bfloat16> v(H);
    CK(cudaMemcpy(v.data(), x + H, H * 2, cudaMemcpyDeviceToHost));
    return v;
  };
  const std::vector<__nv_bfloat16> want_out = out0(tern_up, tern_down);
  auto pair = [&](const char* name, auto&& up, auto&& down) {
    const std::vector<__nv_bfloat16> got = out0(up, down);
    double diff = 0.0;
    for (int i = 0; i < H; ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(__bfloat162float(got[i]) - __bfloat162float(want_out[i]))));
    char label[160];
    std::snprintf(label, sizeof label, "%s (out max |diff| %.1e)", name, diff);
    report(label, chain_us([&](int l) {
             up(l);
             down(l);
           }));
  };
  pair("tern gate/up, lab down not ahead", tern_up, lab_down(down_lab<false>));
  pair("tern gate/up, lab down ahead", tern_up, lab_down(down_lab<true>));
  pair("evict-first gate/up, lab down not ahead", evict_first_up, lab_down(down_lab<false>));
  pair("evict-first gate/up, lab down ahead", evict_first_up, lab_down(down_lab<true>));

  // The ceiling of the shapes: the same bytes streamed by kernels of the same grids.
  report("stream the same bytes (two kernels a layer)", chain_us([&](int l) {
           launch(stream_read, (I / 8) * TOPK, 256, s, reinterpret_cast<const uint4*>(gu[l]),
                  static_cast<int64_t>(TOPK) * 2 * I * H / 8, sink);
           launch(stream_read, H, 256, s, reinterpret_cast<const uint4*>(dn[l]), static_cast<int64_t>(TOPK) * H * I / 8,
                  sink);
         }));
  report("stream the same bytes (one kernel a layer)", chain_us([&](int l) {
           launch(stream_read, 1024, 256, s, reinterpret_cast<const uint4*>(gu[l]),
                  static_cast<int64_t>(TOPK) * 3 * I * H / 8, sink);
         }));
  // Each kernel alone (events around a graph of L of them): where the pair's time goes.
  report("tern gate/up alone (its bytes over both kernels' time: read GB/s x 2/3)", chain_us(tern_up));
  report("tern down alone (read GB/s x 1/3)", chain_us(tern_down));
  return 0;
}
