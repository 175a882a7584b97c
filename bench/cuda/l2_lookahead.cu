// Kernel lab: does a decode product run faster when a latency-bound kernel before it has already
// pulled its weights into L2 (cp.async.bulk.prefetch.L2), while DRAM would otherwise sit idle?
// A chain of "layers", each a short busy kernel (norm_rope / attention stand-in, S us) and then a
// bf16 GEMV over that layer's own weights (fresh weights per layer, so nothing is warm from before);
// captured as one graph with programmatic dependent launch, as tern's compiled decode is.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 bench/cuda/l2_lookahead.cu -o l2_lookahead
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "lab.cuh"

// This block's slice of [pf, pf + bytes), handed to the L2 as bulk prefetches of at most 1 MiB.
__device__ void bulk_prefetch_slice(const char* pf, long long bytes) {
  const long long slice = ((bytes / gridDim.x) + 15) / 16 * 16;
  const long long at = slice * blockIdx.x;
  const long long n = at + slice > bytes ? bytes - at : slice;
  for (long long o = 0; o < n; o += (1 << 20)) {
    const unsigned sz = static_cast<unsigned>(n - o < (1 << 20) ? n - o : (1 << 20));
    if (sz) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf + at + o), "r"(sz) : "memory");
  }
}

// The stand-in for a latency-bound kernel: every block spins `cycles`; with pf_bytes > 0 its blocks
// first hand the L2 a bulk prefetch of [pf, pf + pf_bytes), a slice each (mode 1: before the grid wait,
// mode 2: after it; mode 3: per-line prefetch.global.L2 after it).
__global__ void busy_kernel(long long cycles, const char* pf, long long pf_bytes, int mode) {
  if (mode == 1 && threadIdx.x == 0 && pf_bytes > 0) bulk_prefetch_slice(pf, pf_bytes);
  pdl_wait();
  pdl_launch();
  if (mode == 2 && threadIdx.x == 0 && pf_bytes > 0) bulk_prefetch_slice(pf, pf_bytes);
  if (mode == 3 && pf_bytes > 0) {
    const long long lines = pf_bytes / 128;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < lines; i += (long long)gridDim.x * blockDim.x)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(pf + i * 128));
  }
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// y[n] = w[n, :] . x, a warp per row, 16-byte loads, 4 in flight per lane; K % 256 == 0.
__global__ void __launch_bounds__(256) gemv_kernel(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                                                   float* __restrict__ y, int N, int K) {
  pdl_wait();
  pdl_launch();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = blockIdx.x * 8 + warp;
  if (n >= N) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<long long>(n) * K);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc = 0.0f;
  const int chunks = K / 8;
  for (int c0 = lane; c0 < chunks; c0 += 32 * 4) {
    uint4 a[4], b[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = c0 + 32 * u;
      if (c < chunks) {
        a[u] = __ldcs(wr + c);
        b[u] = __ldg(xr + c);
      } else {
        a[u] = b[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a[u]);
      const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b[u]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 fa = __bfloat1622float2(pa[j]), fb = __bfloat1622float2(pb[j]);
        acc += fa.x * fb.x + fa.y * fb.y;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[n] = acc;
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("device %s, %d SMs, L2 %d MiB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int layers = 32;
  struct Shape {
    const char* name;
    int N, K;
  };
  const Shape shapes[] = {{"0.6B o_proj 1024x2048", 1024, 2048},   {"0.6B down 1024x3072", 1024, 3072},
                          {"0.6B qkv 4096x1024", 4096, 1024},      {"0.6B gate_up 6144x1024", 6144, 1024},
                          {"30B-A3B qkv 5120x2048", 5120, 2048},   {"8B o_proj 4096x4096", 4096, 4096},
                          {"0.6B mlp+o 11264x1024 (22 MB)", 11264, 1024}};
  __nv_bfloat16* x;
  float* y;
  CK(cudaMalloc(&x, 16384 * 2));
  CK(cudaMemset(x, 0, 16384 * 2));
  CK(cudaMalloc(&y, 16384 * 4));
  const int busy_blocks = p.multiProcessorCount;
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  const double clock_ghz = khz / 1e6;
  std::printf("%-32s %8s %6s | %9s %9s %9s %9s %9s %9s  (us per layer)\n", "product", "MB", "busy", "busy",
              "gemv", "both", "pf-early", "pf-after", "pf-lines");
  for (const Shape& sh : shapes) {
    const size_t bytes = static_cast<size_t>(sh.N) * sh.K * 2;
    std::vector<__nv_bfloat16*> w(layers);
    for (auto& p_ : w) {
      CK(cudaMalloc(&p_, bytes));
      CK(cudaMemset(p_, 0, bytes));
    }
    for (double busy_us : {3.0, 6.0}) {
      const long long cycles = static_cast<long long>(busy_us * 1e3 * clock_ghz);
      double res[6];
      for (int variant = 0; variant < 6; ++variant) {
        // 0 busy only, 1 gemv only, 2 busy + gemv, 3 busy prefetching (early) + gemv, 4 after, 5 lines
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        for (int l = 0; l < layers; ++l) {
          const int mode = variant >= 3 ? variant - 2 : 0;
          if (variant != 1)
            launch(busy_kernel, busy_blocks, 128, s, cycles, reinterpret_cast<const char*>(w[l]),
                   static_cast<long long>(mode ? bytes : 0), mode);
          if (variant != 0) launch(gemv_kernel, (sh.N + 7) / 8, 256, s, w[l], x, y, sh.N, sh.K);
        }
        CK(cudaStreamEndCapture(s, &g));
        res[variant] = replay_us(g, s) / layers;
      }
      std::printf("%-32s %8.1f %6.1f | %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", sh.name, bytes / 1e6, busy_us, res[0],
                  res[1], res[2], res[3], res[4], res[5]);
    }
    for (auto p_ : w) CK(cudaFree(p_));
  }
  return 0;
}
