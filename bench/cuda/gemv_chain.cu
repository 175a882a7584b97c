// Kernel lab: a batch-1 decode step's chain of GEMVs (each layer's q/k/v, o, gate/up and down products,
// fresh weights per layer), captured as one graph with programmatic dependent launch. How much of the
// chain's time is each product's ramp and tail, and does a grid that fits beside its neighbours,
// loading its first weights before the grid wait, hide them?
//   plain:    a warp per row, one block per 8 rows (as tern's decode GEMV), dependents after the wait
//   persist:  G blocks of 8 warps striding over the rows, dependents after the wait
//   preload:  persist, but each warp loads its first row's first P x 512 bytes before the wait, and lets
//             dependents launch at once
//   plainpre: plain with the same early loads (the variant measured slower on 2026-12-02)
//   variants: a warp per row in 4- or 8-warp blocks, weights evict-first / through L1 / past L1, with and
//             without early loads (which of these makes early loads pay)
//   one kernel: the whole chain as one cooperative persistent kernel, a grid barrier between products
//             (what a per-step "megakernel" would pay), with or without each warp's first weights of the
//             next product loaded before it arrives at the barrier; and the barriers alone
//   one kernel, all loads: the same, each warp issuing all its loads of a product at once and the whole
//             next product's before the barrier (chain_kernel2)
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/cuda/gemv_chain.cu -o gemv_chain
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "lab.cuh"

// One row's dot from chunk `from` on (chunks of 8 bf16; this lane takes from + lane, + 32, ...), 4 loads in flight.
// L2X: the activations are read from L2 (written earlier in the same kernel by other blocks: L1 would be stale).
template <bool L2X = false>
__device__ __forceinline__ float row_rest(const uint4* wr, const uint4* xr, int from, int chunks, int lane) {
  float acc = 0.0f;
  stream_row(wr, from, chunks, [&](const uint4& a, int c) { acc += dot8(a, L2X ? __ldcg(xr + c) : __ldg(xr + c)); });
  return acc;
}

// mode 0 plain, 1 persist, 2 preload, 3 plainpre. P: early loads per lane (modes 2, 3).
template <int P>
__global__ void __launch_bounds__(256) gemv_kernel(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                                                   __nv_bfloat16* __restrict__ y, int N, int K, int mode) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks = K / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  const bool persist = mode == 1 || mode == 2;
  const int first = blockIdx.x * 8 + warp;
  const int stride = persist ? gridDim.x * 8 : N;
  int n = first;
  if (mode >= 2) {
    pdl_launch();
    uint4 pre[P];
#pragma unroll
    for (int u = 0; u < P; ++u)
      pre[u] = n < N && lane + 32 * u < chunks ? __ldcs(reinterpret_cast<const uint4*>(w + (size_t)n * K) + lane + 32 * u)
                                               : make_uint4(0, 0, 0, 0);
    pdl_wait();
    if (n < N) {
      const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)n * K);
      float acc = 0.0f;
#pragma unroll
      for (int u = 0; u < P; ++u)
        if (lane + 32 * u < chunks) acc += dot8(pre[u], __ldg(xr + lane + 32 * u));
      acc += row_rest(wr, xr, 32 * P, chunks, 0 * lane + lane);
      acc = warp_sum(acc);
      if (lane == 0) y[n] = __float2bfloat16(acc);
    }
    n += stride;
  } else {
    pdl_wait();
    pdl_launch();
  }
  for (; n < N; n += stride) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)n * K);
    float acc = warp_sum(row_rest(wr, xr, 0, chunks, lane));
    if (lane == 0) y[n] = __float2bfloat16(acc);
  }
}


// Which of lab 2's differences from tern's GEMV decides whether early loads pay: a warp per row in
// blocks of WARPS warps, weights loaded evict-first (L 0, __ldcs), through L1 (1, __ldg) or past L1
// (2, ld.global.nc.L1::no_allocate); EARLY: the row's first 4 x 512 bytes before the grid wait,
// dependents let in first.
template <int L>
__device__ __forceinline__ uint4 load_w(const uint4* p) {
  if constexpr (L == 0) {
    return __ldcs(p);
  } else if constexpr (L == 1) {
    return __ldg(p);
  } else {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
}

template <int WARPS, int L, bool EARLY>
__global__ void __launch_bounds__(WARPS * 32) gemv_var_kernel(const __nv_bfloat16* __restrict__ w,
                                                              const __nv_bfloat16* __restrict__ x,
                                                              __nv_bfloat16* __restrict__ y, int N, int K) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks = K / 8, n = blockIdx.x * WARPS + warp;
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  const uint4* wr = reinterpret_cast<const uint4*>(w + (size_t)(n < N ? n : 0) * K);
  uint4 a[4];
  int c0 = lane;
  if constexpr (EARLY) {
    pdl_launch();
#pragma unroll
    for (int u = 0; u < 4; ++u) a[u] = n < N && c0 + 32 * u < chunks ? load_w<L>(wr + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
    pdl_wait();
  } else {
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int u = 0; u < 4; ++u) a[u] = n < N && c0 + 32 * u < chunks ? load_w<L>(wr + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
  }
  if (n >= N) return;
  float acc = 0.0f;
  for (;;) {
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (c0 + 32 * u < chunks) acc += dot8(a[u], __ldg(xr + c0 + 32 * u));
    c0 += 128;
    if (c0 >= chunks) break;
#pragma unroll
    for (int u = 0; u < 4; ++u) a[u] = c0 + 32 * u < chunks ? load_w<L>(wr + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[n] = __float2bfloat16(acc);
}

// A grid-wide barrier for a cooperative launch: `count` rises by gridDim.x per barrier (zeroed before the
// launch), so barrier b waits for (b + 1) * gridDim.x arrivals.
__device__ __forceinline__ void grid_barrier(unsigned* count, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    } while (v < target);
  }
  __syncthreads();
}

struct Product {
  const __nv_bfloat16* w;
  int N, K;
};

// The chain in one persistent kernel: product i reads buf[i % 2] and writes buf[(i + 1) % 2], warps
// strided over its rows; a grid barrier after each. With prefetch, each warp loads the first P x 512
// bytes of its first row of product i + 1 before arriving at the barrier of product i.
template <int P>
__global__ void __launch_bounds__(256) chain_kernel(const Product* __restrict__ prods, int n, __nv_bfloat16* buf0,
                                                    __nv_bfloat16* buf1, unsigned* count, int prefetch) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gw = blockIdx.x * 8 + warp, tw = gridDim.x * 8;
  uint4 pre[P];
  auto first_loads = [&](const Product& pr) {
#pragma unroll
    for (int u = 0; u < P; ++u)
      pre[u] = gw < pr.N && lane + 32 * u < pr.K / 8
                   ? __ldcs(reinterpret_cast<const uint4*>(pr.w + (size_t)gw * pr.K) + lane + 32 * u)
                   : make_uint4(0, 0, 0, 0);
  };
  if (prefetch && n > 0) first_loads(prods[0]);
  for (int i = 0; i < n; ++i) {
    const Product pr = prods[i];
    const uint4* xr = reinterpret_cast<const uint4*>(i % 2 ? buf1 : buf0);
    __nv_bfloat16* y = i % 2 ? buf0 : buf1;
    const int chunks = pr.K / 8;
    int r = gw;
    if (prefetch && r < pr.N) {
      float acc = 0.0f;
#pragma unroll
      for (int u = 0; u < P; ++u)
        if (lane + 32 * u < chunks) acc += dot8(pre[u], __ldcg(xr + lane + 32 * u));
      acc = warp_sum(acc + row_rest<true>(reinterpret_cast<const uint4*>(pr.w + (size_t)r * pr.K), xr, 32 * P, chunks, lane));
      if (lane == 0) y[r] = __float2bfloat16(acc);
      r += tw;
    }
    for (; r < pr.N; r += tw) {
      const float acc = warp_sum(row_rest<true>(reinterpret_cast<const uint4*>(pr.w + (size_t)r * pr.K), xr, 0, chunks, lane));
      if (lane == 0) y[r] = __float2bfloat16(acc);
    }
    if (prefetch && i + 1 < n) first_loads(prods[i + 1]);
    grid_barrier(count, static_cast<unsigned>(i + 1) * gridDim.x);
  }
}

// chain_kernel, keeping each product's memory parallelism: every warp issues all of its weight loads for
// a product at once (its rows gw, gw + tw, ... times its chunks lane, lane + 32, ...: at most CAP 16-byte
// loads a lane, held in registers), and loads the next product's weights before arriving at the barrier
// (weights depend on nothing), so a barrier overlaps the next product's DRAM latency. After the barrier
// only the activations are read (from L2). The host launches it only where every product fits CAP.
template <int CAP>
__device__ __forceinline__ void load_product(const Product& pr, int gw, int tw, int lane, uint4 (&r)[CAP]) {
  const int chunks = pr.K / 8, cpl = (chunks + 31) / 32;
#pragma unroll
  for (int i = 0; i < CAP; ++i) {
    const int j = i / cpl, u = i % cpl, row = gw + j * tw, c = lane + 32 * u;
    r[i] = row < pr.N && c < chunks ? load_w<0>(reinterpret_cast<const uint4*>(pr.w + (size_t)row * pr.K) + c)
                                    : make_uint4(0, 0, 0, 0);
  }
}

template <int CAP>
__global__ void __launch_bounds__(256) chain_kernel2(const Product* __restrict__ prods, int n, __nv_bfloat16* buf0,
                                                     __nv_bfloat16* buf1, unsigned* count) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gw = blockIdx.x * 8 + warp, tw = gridDim.x * 8;
  uint4 r[CAP];
  if (n > 0) load_product<CAP>(prods[0], gw, tw, lane, r);
  for (int p = 0; p < n; ++p) {
    const Product pr = prods[p];
    const uint4* xr = reinterpret_cast<const uint4*>(p % 2 ? buf1 : buf0);
    __nv_bfloat16* y = p % 2 ? buf0 : buf1;
    const int chunks = pr.K / 8, cpl = (chunks + 31) / 32;
    float cur = 0.0f;
    int cur_j = 0;
#pragma unroll
    for (int i = 0; i < CAP; ++i) {
      const int j = i / cpl, u = i % cpl, row = gw + j * tw, c = lane + 32 * u;
      if (row >= pr.N) break;  // uniform over the warp: rows only grow with i
      if (j != cur_j) {
        const float t = warp_sum(cur);
        if (lane == 0) y[gw + cur_j * tw] = __float2bfloat16(t);
        cur = 0.0f;
        cur_j = j;
      }
      if (c < chunks) cur += dot8(r[i], __ldcg(xr + c));
    }
    if (gw < pr.N) {
      const float t = warp_sum(cur);
      if (lane == 0) y[gw + cur_j * tw] = __float2bfloat16(t);
    }
    if (p + 1 < n) load_product<CAP>(prods[p + 1], gw, tw, lane, r);
    grid_barrier(count, static_cast<unsigned>(p + 1) * gridDim.x);
  }
}

struct Shape {
  int N, K;
};

static void chain(const char* name, std::vector<Shape> layer, int layers, cudaStream_t s, int sms) {
  std::vector<std::vector<__nv_bfloat16*>> w(layers);
  size_t bytes = 0;
  int maxn = 0, maxk = 0;
  for (auto& l : w)
    for (const Shape& sh : layer) {
      __nv_bfloat16* p;
      CK(cudaMalloc(&p, (size_t)sh.N * sh.K * 2));
      CK(cudaMemset(p, 0, (size_t)sh.N * sh.K * 2));
      l.push_back(p);
      bytes += (size_t)sh.N * sh.K * 2;
      maxn = maxn > sh.N ? maxn : sh.N;
      maxk = maxk > sh.K ? maxk : sh.K;
    }
  __nv_bfloat16 *xa, *xb;
  const int width = maxn > maxk ? maxn : maxk;
  CK(cudaMalloc(&xa, width * 2));
  CK(cudaMalloc(&xb, width * 2));
  CK(cudaMemset(xa, 0, width * 2));
  CK(cudaMemset(xb, 0, width * 2));
  std::printf("%s: %d layers, %.1f MB of weights per step\n", name, layers, bytes / 1e6);
  struct Variant {
    const char* name;
    int mode, grid_mult, pre;
  };
  const Variant variants[] = {{"plain", 0, 0, 0},        {"persist 1/SM", 1, 1, 0}, {"persist 2/SM", 1, 2, 0},
                              {"preload 1/SM P4", 2, 1, 4}, {"preload 2/SM P4", 2, 2, 4}, {"preload 1/SM P8", 2, 1, 8},
                              {"preload 2/SM P8", 2, 2, 8}, {"plainpre P4", 3, 0, 4}};
  for (const Variant& v : variants) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int l = 0; l < layers; ++l)
      for (size_t i = 0; i < layer.size(); ++i) {
        const Shape sh = layer[i];
        const int grid = v.grid_mult ? sms * v.grid_mult : (sh.N + 7) / 8;
        __nv_bfloat16* in = (l * layer.size() + i) % 2 ? xb : xa;
        __nv_bfloat16* out = (l * layer.size() + i) % 2 ? xa : xb;
        if (v.pre == 8)
          launch(gemv_kernel<8>, grid, 256, s, (const __nv_bfloat16*)w[l][i], (const __nv_bfloat16*)in, out, sh.N, sh.K, v.mode);
        else
          launch(gemv_kernel<4>, grid, 256, s, (const __nv_bfloat16*)w[l][i], (const __nv_bfloat16*)in, out, sh.N, sh.K, v.mode);
      }
    CK(cudaStreamEndCapture(s, &g));
    const double us = replay_us(g, s);
    std::printf("  %-18s %9.1f us per step, %6.2f us per layer, %7.0f GB/s\n", v.name, us, us / layers, bytes / us / 1e3);
  }
  // Lab 2's differences from tern's GEMV, one at a time (see gemv_var_kernel).
  struct Var {
    const char* name;
    void (*k)(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int, int);
    int warps;
  };
  const Var vars[] = {{"8w evict-first", gemv_var_kernel<8, 0, false>, 8},
                      {"8w evict-first early", gemv_var_kernel<8, 0, true>, 8},
                      {"8w ldg", gemv_var_kernel<8, 1, false>, 8},
                      {"8w ldg early", gemv_var_kernel<8, 1, true>, 8},
                      {"8w past-L1", gemv_var_kernel<8, 2, false>, 8},
                      {"8w past-L1 early", gemv_var_kernel<8, 2, true>, 8},
                      {"4w evict-first", gemv_var_kernel<4, 0, false>, 4},
                      {"4w evict-first early", gemv_var_kernel<4, 0, true>, 4},
                      {"4w ldg", gemv_var_kernel<4, 1, false>, 4},
                      {"4w ldg early", gemv_var_kernel<4, 1, true>, 4},
                      {"4w past-L1", gemv_var_kernel<4, 2, false>, 4},
                      {"4w past-L1 early", gemv_var_kernel<4, 2, true>, 4}};
  for (const Var& v : vars) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int l = 0; l < layers; ++l)
      for (size_t i = 0; i < layer.size(); ++i) {
        const Shape sh = layer[i];
        __nv_bfloat16* in = (l * layer.size() + i) % 2 ? xb : xa;
        __nv_bfloat16* out = (l * layer.size() + i) % 2 ? xa : xb;
        launch(v.k, (sh.N + v.warps - 1) / v.warps, v.warps * 32, s, (const __nv_bfloat16*)w[l][i],
               (const __nv_bfloat16*)in, out, sh.N, sh.K);
      }
    CK(cudaStreamEndCapture(s, &g));
    const double us = replay_us(g, s);
    std::printf("  %-22s %9.1f us per step, %6.2f us per layer, %7.0f GB/s\n", v.name, us, us / layers, bytes / us / 1e3);
  }

  // The same chain as one cooperative kernel (activations read from L2; every product's output lands in
  // the other buffer).
  std::vector<Product> prods;
  for (int l = 0; l < layers; ++l)
    for (size_t i = 0; i < layer.size(); ++i) prods.push_back({w[l][i], layer[i].N, layer[i].K});
  Product* dprods;
  CK(cudaMalloc(&dprods, prods.size() * sizeof(Product)));
  CK(cudaMemcpy(dprods, prods.data(), prods.size() * sizeof(Product), cudaMemcpyHostToDevice));
  unsigned* count;
  CK(cudaMalloc(&count, sizeof(unsigned)));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, chain_kernel<4>, 256, 0));
  for (int blocks_per_sm : {1, 2, 4}) {
    if (blocks_per_sm > per_sm) continue;
    for (int variant = 0; variant < 3; ++variant) {  // 0: no prefetch, 1: prefetch, 2: barriers alone
      int n = static_cast<int>(prods.size());
      int prefetch = variant == 1;
      Product* pp = dprods;
      std::vector<Product> empty(prods.size(), Product{nullptr, 0, 8});
      Product* dempty = nullptr;
      if (variant == 2) {
        CK(cudaMalloc(&dempty, empty.size() * sizeof(Product)));
        CK(cudaMemcpy(dempty, empty.data(), empty.size() * sizeof(Product), cudaMemcpyHostToDevice));
        pp = dempty;
      }
      void* args[] = {&pp, &n, &xa, &xb, &count, &prefetch};
      const dim3 grid(sms * blocks_per_sm);
      auto once = [&] {
        CK(cudaMemsetAsync(count, 0, sizeof(unsigned), s));
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(chain_kernel<4>), grid, dim3(256), args, 0, s));
      };
      const double us = time_us(once, s);
      const char* what[] = {"one kernel", "one kernel, prefetch", "barriers alone"};
      std::printf("  %-22s %d/SM %9.1f us per step, %6.2f us per layer, %7.0f GB/s\n", what[variant], blocks_per_sm, us,
                  us / layers, variant == 2 ? 0.0 : bytes / us / 1e3);
      if (dempty) CK(cudaFree(dempty));
    }
  }
  // chain_kernel2 (all of a warp's loads at once, the next product's before the barrier), where every
  // product's rows x chunks per warp fit its 16 registers-worth of loads.
  for (int blocks_per_sm : {1, 2, 4}) {
    int cap_per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cap_per_sm, chain_kernel2<16>, 256, 0));
    if (blocks_per_sm > cap_per_sm) continue;
    const int tw = sms * blocks_per_sm * 8;
    bool fits = true;
    for (const Shape& sh : layer) {
      const int rows = (sh.N + tw - 1) / tw, cpl = (sh.K / 8 + 31) / 32;
      fits = fits && rows * cpl <= 16;
    }
    if (!fits) {
      std::printf("  %-22s %d/SM: a product needs more than 16 loads a lane, skipped\n", "one kernel, all loads", blocks_per_sm);
      continue;
    }
    int n = static_cast<int>(prods.size());
    void* args[] = {&dprods, &n, &xa, &xb, &count};
    const dim3 grid(sms * blocks_per_sm);
    auto once = [&] {
      CK(cudaMemsetAsync(count, 0, sizeof(unsigned), s));
      CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(chain_kernel2<16>), grid, dim3(256), args, 0, s));
    };
    const double us = time_us(once, s);
    std::printf("  %-22s %d/SM %9.1f us per step, %6.2f us per layer, %7.0f GB/s\n", "one kernel, all loads", blocks_per_sm,
                us, us / layers, bytes / us / 1e3);
  }
  CK(cudaFree(dprods));
  CK(cudaFree(count));
  for (auto& l : w)
    for (auto p : l) CK(cudaFree(p));
  CK(cudaFree(xa));
  CK(cudaFree(xb));
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int sms = p.multiProcessorCount;
  // copy ceiling in the same run
  {
    const size_t n = size_t(2) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 5; ++i) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("device %s, %d SMs; copy %.0f GB/s (read + write)\n", p.name, sms, 2.0 * n * 5 / (ms * 1e-3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  chain("Qwen3-0.6B products", {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}}, 28, s, sms);
  chain("Qwen3-30B-A3B attention products", {{5120, 2048}, {2048, 4096}}, 48, s, sms);
  chain("Qwen3-8B products", {{6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 12288}}, 36, s, sms);
  return 0;
}
