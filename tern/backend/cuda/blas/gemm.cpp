// cuBLASLt handle, workspace and plan cache behind tern::cuda::gemm.
#include "tern/backend/cuda/blas/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/backend/cuda/runtime/check.h"
#include "tern/base/error.h"

#define TERN_CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                              \
    cublasStatus_t tern_st_ = (expr);                                                               \
    if (tern_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                           \
      TERN_THROW("[cublas] {} failed: {} ({})", #expr, cublasLt_status_name(tern_st_),              \
                 static_cast<int>(tern_st_));                                                       \
    }                                                                                               \
  } while (0)

namespace tern::cuda {
namespace {

const char* cublasLt_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "alloc failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "arch mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cudaDataType_t cuda_type(Dtype d) {
  switch (d) {
    case Dtype::f32: return CUDA_R_32F;
    case Dtype::bf16: return CUDA_R_16BF;
    case Dtype::f16: return CUDA_R_16F;
    default: TERN_THROW("[gemm] expected f32, bf16 or f16, got {}", dtype_name(d));
  }
}

uint32_t alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a) a /= 2;
  return a;
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using Key = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

struct Blas {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<Key, Plan> plans;
};

Blas& blas() {
  static Blas* b = [] {
    auto* x = new Blas();  // never destroyed: kernels may be queued until exit
    TERN_CUBLAS_CHECK(cublasLtCreate(&x->handle));
    x->workspace = device_alloc(kWorkspaceBytes);
    return x;
  }();
  return *b;
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TERN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  if (batch > 1) {
    int32_t b32 = static_cast<int32_t>(batch);
    TERN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b32, sizeof(b32)));
    TERN_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

// The plan's descriptor and layouts, without an algorithm.
Plan make_layouts(const GemmDesc& d) {
  Plan p;
  const cudaDataType_t ab = cuda_type(d.ab_dtype), ct = cuda_type(d.c_dtype);
  TERN_CHECK(d.c_dtype == d.ab_dtype || d.c_dtype == Dtype::f32, "[gemm] expected output {} or f32, got {}",
             dtype_name(d.ab_dtype), dtype_name(d.c_dtype));
  TERN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  p.la = d.trans_a ? make_layout(ab, d.k, d.m, d.lda, d.batch, d.stride_a)
                   : make_layout(ab, d.m, d.k, d.lda, d.batch, d.stride_a);
  p.lb = d.trans_b ? make_layout(ab, d.n, d.k, d.ldb, d.batch, d.stride_b)
                   : make_layout(ab, d.k, d.n, d.ldb, d.batch, d.stride_b);
  p.lc = make_layout(ct, d.m, d.n, d.ldc, d.batch, d.stride_c);
  return p;
}

// Up to `count` algorithms cuBLASLt's heuristic offers for the plan, best-first (at least one).
std::vector<cublasLtMatmulHeuristicResult_t> heuristics(Blas& bl, const Plan& p, const GemmDesc& d, uint32_t al_a,
                                                        uint32_t al_b, uint32_t al_c, int count) {
  cublasLtMatmulPreference_t pref = nullptr;
  TERN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = kWorkspaceBytes;
  TERN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  TERN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  TERN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  TERN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  TERN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(bl.handle, p.op, p.la, p.lb, p.lc, p.lc, pref, count, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  TERN_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0,
             "[gemm] expected a cuBLASLt algorithm for {}x{}x{} ({} -> {}, batch {}), got none (status {})", d.m, d.n,
             d.k, dtype_name(d.ab_dtype), dtype_name(d.c_dtype), d.batch, static_cast<int>(st));
  results.resize(static_cast<size_t>(found));
  return results;
}

cublasStatus_t run_algo(Blas& bl, const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                        void* c, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(bl.handle, p.op, &alpha, a, p.la, b, p.lb, &beta, c, p.lc, c, p.lc, &algo, bl.workspace,
                        kWorkspaceBytes, stream);
}

// The median time of `reps` calls of one algorithm after one untimed call, in us, `between` queued
// before each call outside its timing (an L2 flush); a negative value when the algorithm fails to run on
// these buffers. Synchronises the stream.
float time_algo(Blas& bl, const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* c,
                cudaStream_t stream, int reps, const std::function<void()>& between) {
  if (run_algo(bl, p, algo, a, b, c, stream) != CUBLAS_STATUS_SUCCESS) return -1.0f;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  TERN_CUDA_CHECK(cudaEventCreate(&e0));
  TERN_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    if (between) between();
    TERN_CUDA_CHECK(cudaEventRecord(e0, stream));
    const cublasStatus_t st = run_algo(bl, p, algo, a, b, c, stream);
    TERN_CUDA_CHECK(cudaEventRecord(e1, stream));
    TERN_CUDA_CHECK(cudaEventSynchronize(e1));
    if (st != CUBLAS_STATUS_SUCCESS) break;
    float ms = 0.0f;
    TERN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(1000.0f * ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (t.size() != static_cast<size_t>(reps)) return -1.0f;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Plan make_plan(Blas& bl, const GemmDesc& d, uint32_t al_a, uint32_t al_b, uint32_t al_c) {
  Plan p = make_layouts(d);
  p.algo = heuristics(bl, p, d, al_a, al_b, al_c, 1)[0].algo;
  return p;
}

// An algorithm's configuration in words: its id, tile, stages, split-K and cluster shape ids.
std::string algo_config(const cublasLtMatmulAlgo_t& algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    int32_t v = -1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS) return -1;
    return static_cast<int>(v);
  };
  uint32_t tile = 0, stages = 0, cluster = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &written);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster),
                                       &written);
  return fmt::format("algo {} tile {} stages {} split-k {} cluster {}", get(CUBLASLT_ALGO_CONFIG_ID), tile, stages,
                     get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), cluster);
}

}  // namespace

void gemm(const GemmDesc& d, const void* a, const void* b, void* c, cudaStream_t stream) {
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  if (d.k == 0) {
    // An empty sum: cuBLASLt may reject k == 0, and the result is zeros.
    const size_t es = dtype_size(d.c_dtype);
    for (int64_t i = 0; i < d.batch; ++i) {
      TERN_CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(c) + i * d.stride_c * es, d.ldc * es, 0, d.m * es, d.n,
                                        stream));
    }
    return;
  }
  Blas& bl = blas();
  const uint32_t al_a = alignment(a), al_b = alignment(b), al_c = alignment(c);
  Key key{static_cast<int>(d.ab_dtype), static_cast<int>(d.c_dtype), d.trans_a, d.trans_b, d.m, d.n, d.k, d.lda,
          d.ldb, d.ldc, d.batch, d.stride_a, d.stride_b, d.stride_c, al_a, al_b, al_c};
  const Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(bl.mu);
    auto it = bl.plans.find(key);
    if (it == bl.plans.end()) it = bl.plans.emplace(key, make_plan(bl, d, al_a, al_b, al_c)).first;
    plan = &it->second;
  }
  TERN_CUBLAS_CHECK(run_algo(bl, *plan, plan->algo, a, b, c, stream));
}

std::vector<GemmAlgoTime> gemm_algo_times(const GemmDesc& d, const void* a, const void* b, void* c,
                                          cudaStream_t stream, int count, int reps,
                                          const std::function<void()>& between) {
  Blas& bl = blas();
  Plan p = make_layouts(d);
  std::vector<GemmAlgoTime> out;
  for (const auto& h : heuristics(bl, p, d, alignment(a), alignment(b), alignment(c), count))
    out.push_back({algo_config(h.algo), time_algo(bl, p, h.algo, a, b, c, stream, reps, between)});
  cublasLtMatrixLayoutDestroy(p.la);
  cublasLtMatrixLayoutDestroy(p.lb);
  cublasLtMatrixLayoutDestroy(p.lc);
  cublasLtMatmulDescDestroy(p.op);
  return out;
}

}  // namespace tern::cuda
