// Kernel lab: the two products of a Qwen3-8B decode layer that cuBLASLt splits over K at 8-64 rows
// (o_proj 4,096 x 4,096 and down 4,096 x 12,288), each followed by the residual add and RMSNorm that
// open the next product. A chain of L layers (fresh weights per layer) captured as one graph; us per
// layer for:
//   lt:  cuBLASLt's first heuristic candidate with a bf16 output (tern's GEMM, which at these rows may
//        split K and reduce in a kernel of its own), then an add+norm kernel
//   kS:  the K range cut into S slices as one strided-batched cuBLASLt product with f32 partials
//        [S, M, N], then one kernel that sums the partials, adds the residual and norms: the split-K
//        reduce folded into the add+norm that follows anyway
// The final residual stream of each kS chain is checked against lt's (max |difference|, bf16).
// Build: nvcc -O3 -std=c++20 -arch=sm_90 -I. bench/cuda/splitk_lab.cu -lcublasLt -o splitk_lab
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/cuda/lab.cuh"

constexpr int H = 4096, I = 12288, L = 36;

#define LT(x)                                                                     \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

cublasLtHandle_t lt_handle;
void* lt_ws;
constexpr size_t kWs = size_t{32} << 20;

// Y [M, N] (row-major, of type ct) = X [M, K] W^T, W [N, K] row-major; with S > 1 the K range in S
// slices, slice s's partial at Y + s * M * N.
struct Product {
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t a{}, b{}, d{};
  cublasLtMatmulAlgo_t algo{};
  Product(int M, int N, int K, int S, cudaDataType_t ct) {
    const int Ks = K / S;
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    LT(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, Ks, N, K));
    LT(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, Ks, M, K));
    LT(cublasLtMatrixLayoutCreate(&d, ct, N, M, N));
    if (S > 1) {
      int32_t bc = S;
      int64_t sa = Ks, sd = int64_t{M} * N;
      for (auto l : {a, b}) {
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof(sa)));
      }
      LT(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
      LT(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, sizeof(sd)));
    }
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kWs;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt_handle, op, a, b, d, d, pref, 1, &r, &found));
    if (!found) std::exit(2);
    algo = r.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void run(const void* w, const void* x, void* y, cudaStream_t s) const {
    const float one = 1, zero = 0;
    LT(cublasLtMatmul(lt_handle, op, &one, w, a, x, b, &zero, y, d, y, d, &algo, lt_ws, kWs, s));
  }
};

// Row m: stream += sum of the P inputs' row m (f32 partials, or one bf16 product); normed = rmsnorm(stream) * g.
template <typename T>
__global__ void __launch_bounds__(256) add_norm_kernel(__nv_bfloat16* stream, __nv_bfloat16* normed,
                                                      const T* parts, int P, int M, const __nv_bfloat16* g) {
  pdl_wait();
  const int m = blockIdx.x;
  constexpr int E = H / 256;  // 16 elements a thread, in two runs of 8
  float v[E];
  float ss = 0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int c = r * (H / 2) + threadIdx.x * 8;
    const uint4 sv = *reinterpret_cast<const uint4*>(stream + int64_t{m} * H + c);
    const __nv_bfloat16* sb = reinterpret_cast<const __nv_bfloat16*>(&sv);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[r * 8 + i] = __bfloat162float(sb[i]);
    for (int p = 0; p < P; ++p) {
      const T* row = parts + (int64_t{p} * M + m) * H + c;
      if constexpr (sizeof(T) == 4) {
        const float4 a = *reinterpret_cast<const float4*>(row), b = *reinterpret_cast<const float4*>(row + 4);
        v[r * 8 + 0] += a.x, v[r * 8 + 1] += a.y, v[r * 8 + 2] += a.z, v[r * 8 + 3] += a.w;
        v[r * 8 + 4] += b.x, v[r * 8 + 5] += b.y, v[r * 8 + 6] += b.z, v[r * 8 + 7] += b.w;
      } else {
        const uint4 pv = *reinterpret_cast<const uint4*>(row);
        const __nv_bfloat16* pb = reinterpret_cast<const __nv_bfloat16*>(&pv);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[r * 8 + i] += __bfloat162float(pb[i]);
      }
    }
    uint4 out;
    __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      ob[i] = __float2bfloat16(v[r * 8 + i]);
      v[r * 8 + i] = __bfloat162float(ob[i]);
      ss += v[r * 8 + i] * v[r * 8 + i];
    }
    *reinterpret_cast<uint4*>(stream + int64_t{m} * H + c) = out;
  }
  pdl_launch();
  __shared__ float red[8];
  for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();
  float tot = 0;
  for (int i = 0; i < 8; ++i) tot += red[i];
  const float inv = rsqrtf(tot / H + 1e-6f);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int c = r * (H / 2) + threadIdx.x * 8;
    uint4 out;
    __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
    for (int i = 0; i < 8; ++i) ob[i] = __float2bfloat16(v[r * 8 + i] * inv * __bfloat162float(g[c + i]));
    *reinterpret_cast<uint4*>(normed + int64_t{m} * H + c) = out;
  }
}

__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16(scale * ((h & 0xffff) / 32768.0f - 1.0f));
  }
}

__nv_bfloat16* alloc_fill(int64_t n, uint32_t seed, float scale) {
  __nv_bfloat16* p;
  CK(cudaMalloc(&p, n * 2));
  fill_kernel<<<1024, 256>>>(p, n, seed, scale);
  CK(cudaGetLastError());
  return p;
}

int main(int argc, char** argv) {
  LT(cublasLtCreate(&lt_handle));
  CK(cudaMalloc(&lt_ws, kWs));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<__nv_bfloat16*> wo(L), wd(L);
  for (int l = 0; l < L; ++l) {
    wo[l] = alloc_fill(int64_t{H} * H, 11 + l, 0.02f);
    wd[l] = alloc_fill(int64_t{H} * I, 1011 + l, 0.02f);
  }
  const __nv_bfloat16* g = alloc_fill(H, 7, 1.0f);
  const int64_t max_m = 64;
  __nv_bfloat16* xa = alloc_fill(max_m * H, 3, 1.0f);  // the attention's output rows
  __nv_bfloat16* xh = alloc_fill(max_m * I, 5, 1.0f);  // SwiGLU's output rows
  __nv_bfloat16 *stream, *stream0, *normed, *ybf;
  float* part;
  CK(cudaMalloc(&stream, max_m * H * 2));
  CK(cudaMalloc(&stream0, max_m * H * 2));
  CK(cudaMalloc(&normed, max_m * H * 2));
  CK(cudaMalloc(&ybf, max_m * H * 2));
  CK(cudaMalloc(&part, 8 * max_m * H * 4));
  fill_kernel<<<1024, 256>>>(stream0, max_m * H, 9, 1.0f);
  CK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> ref(max_m * H), got(max_m * H);

  std::printf("%-6s %-5s %12s %12s %12s\n", "rows", "chain", "us a layer", "GB/s", "max |diff|");
  for (int M : {8, 16, 32, 64}) {
    for (int S : {1, 2, 4, 8}) {
      // o_proj: K = H; down: K = I, both cut into S slices of a multiple of 64 elements (aligned batch
      // strides). S = 3 and 6 would cut 4,096 unevenly.
      Product po(M, H, H, S, S == 1 ? CUDA_R_16BF : CUDA_R_32F), pd(M, H, I, S, S == 1 ? CUDA_R_16BF : CUDA_R_32F);
      auto layer = [&](int l) {
        if (S == 1) {
          po.run(wo[l], xa, ybf, s);
          launch(add_norm_kernel<__nv_bfloat16>, dim3(M), 256, s, stream, normed, (const __nv_bfloat16*)ybf, 1, M, g);
          pd.run(wd[l], xh, ybf, s);
          launch(add_norm_kernel<__nv_bfloat16>, dim3(M), 256, s, stream, normed, (const __nv_bfloat16*)ybf, 1, M, g);
        } else {
          po.run(wo[l], xa, part, s);
          launch(add_norm_kernel<float>, dim3(M), 256, s, stream, normed, (const float*)part, S, M, g);
          pd.run(wd[l], xh, part, s);
          launch(add_norm_kernel<float>, dim3(M), 256, s, stream, normed, (const float*)part, S, M, g);
        }
      };
      // One pass from the same stream for the check, then the timed graph.
      CK(cudaMemcpyAsync(stream, stream0, max_m * H * 2, cudaMemcpyDeviceToDevice, s));
      for (int l = 0; l < L; ++l) layer(l);
      CK(cudaMemcpyAsync((S == 1 ? ref : got).data(), stream, M * H * 2, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      float diff = 0;
      if (S > 1)
        for (int i = 0; i < M * H; ++i)
          diff = std::fmax(diff, std::fabs(__bfloat162float(ref[i]) - __bfloat162float(got[i])));
      cudaGraph_t graph;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < L; ++l) layer(l);
      CK(cudaStreamEndCapture(s, &graph));
      const double us = replay_us(graph, s) / L;
      const double bytes = 2.0 * H * (H + I);
      char name[16];
      std::snprintf(name, sizeof name, S == 1 ? "lt" : "k%d", S);
      std::printf("%-6d %-5s %12.2f %12.0f %12.4f\n", M, name, us, bytes / us / 1e3, diff);
    }
  }
  return 0;
}
