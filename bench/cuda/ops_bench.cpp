// CUDA op benchmarks: device copy bandwidth (the memory ceiling), cuBLASLt GEMM rate, the engine's hot
// ops at Qwen3-8B / 0.6B shapes and the routed experts at Qwen3-30B-A3B shapes, each as median time,
// achieved rate and % of ceiling.
// usage: tern_cuda_bench [--quick | --kv | --gemv | --skinny | --decode | --kv-splits | --prefill | --sampling |
//                         --gemm-algos]
//   --kv: the copy ceiling, the quantized-KV decode attention, the packed prefix decode and a prefill
//         chunk's encode only
//   --gemv: the copy ceiling and a batch-1 layer's four decode products in sequence, over enough layers'
//           weights that none stays in L2 (the decode step's regime), at Qwen3-8B and 0.6B shapes, and
//           Qwen3-30B-A3B's attention products
//   --skinny: the copy ceiling and the decode products of 8 to 64 rows (batched decode) at Qwen3-8B and
//             0.6B shapes: cuBLASLt (then the separate SwiGLU for gate/up), the engine's choice ("auto")
//             and the tensor-core kernel (up to 32 rows) with K split over 1, 2, 4, 8 blocks per cluster
//   --decode: the copy ceiling and bf16 flash-decoding at Qwen3-8B heads over key-split counts, with
//             the splits merged by the last block and by a separate combine launch
//   --kv-splits [FILTER]: the copy ceiling and decode attention over quantized KV at Qwen3-8B heads over
//                key-split counts, beside bf16; FILTER keeps the rows whose name contains it (for a profiler)
//   --prefill: the copy ceiling and the flash prefill kernel at the head shapes of Qwen3-8B, Qwen3-0.6B,
//              Qwen3.5-9B and Gemma 4 (its sliding and full layers), causal, over 512-8,192 tokens
//   --gemm-algos: the copy ceiling and, for Qwen3-8B's decode products at 8, 32 and 64 rows (and its LM
//                 head at 32), each of the first 16 algorithms cuBLASLt's heuristic offers, best-first,
//                 with the weights out of L2
//   --sampling: the copy ceiling and the device sampler's ops (top-k, the row draw, the nucleus mask, log_softmax, sum) on
//               one Qwen3 vocabulary row, GPU time and host wall time with the copy back
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tern/backend/cuda/blas/gemm.h"
#include "tern/backend/cuda/runtime/check.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/attention.h"
#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/gated_linear.h"
#include "tern/ops/kv_quant.h"
#include "tern/ops/matmul.h"
#include "tern/ops/moe.h"
#include "tern/ops/norm.h"
#include "tern/ops/reduce.h"
#include "tern/ops/rope.h"

using namespace tern;

namespace {

const Device kGpu = Device::cuda(0);

Tensor randn_gpu(const Shape& shape, Dtype dt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = dist(rng);
  Tensor t = Tensor::from_vector(v, shape).to(kGpu);
  return dt == Dtype::f32 ? t : ops::cast(t, dt);
}

// Median seconds of fn over `reps` timed runs (after warm-ups), timed with CUDA events.
double time_it(const std::function<void()>& fn, int reps = 20, int warm = 3) {
  cudaStream_t s = cuda::stream();
  for (int i = 0; i < warm; ++i) fn();
  TERN_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  TERN_CUDA_CHECK(cudaEventCreate(&a));
  TERN_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> ts;
  for (int i = 0; i < reps; ++i) {
    TERN_CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    TERN_CUDA_CHECK(cudaEventRecord(b, s));
    TERN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    TERN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms / 1e3);
  }
  TERN_CUDA_CHECK(cudaEventDestroy(a));
  TERN_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

double g_copy_bw = 0;  // bytes/s, read + write
double g_gemm_flops = 0;

void row(const char* name, double sec, double bytes, double flops) {
  std::printf("%-44s %10.1f us", name, sec * 1e6);
  if (bytes > 0) std::printf("  %7.0f GB/s (%3.0f%% of copy)", bytes / sec / 1e9, 100.0 * bytes / sec / g_copy_bw);
  if (flops > 0) std::printf("  %6.1f TFLOP/s", flops / sec / 1e12);
  std::printf("\n");
}

// A decode attention problem at Qwen3-8B heads (32 query, 8 kv heads, dim 128): one query per batch row
// over Lk cached keys, and the bytes the bf16 read moves.
struct DecodeCase {
  Tensor q, k, v;
  ops::AttentionMask m;
  double bytes() const { return 2.0 * k.nbytes() + 2.0 * q.nbytes(); }
};
DecodeCase decode_case(int64_t B, int64_t Lk) {
  DecodeCase c{randn_gpu({B, 32, 1, 128}, Dtype::bf16, 30),
               randn_gpu({B, 8, Lk, 128}, Dtype::bf16, 31),
               randn_gpu({B, 8, Lk, 128}, Dtype::bf16, 32),
               {}};
  c.m.q_offset = Lk - 1;
  return c;
}

// The quantized storages of the caches at head dim 128; the fourth is the default TurboQuant (k8v3).
struct KVScheme {
  const char* name;
  ops::KVRowCodec k, v;
};
const KVScheme kKVSchemes[] = {
    {"affine8", {ops::KVRowCodec::affine, 8, 64, 128}, {ops::KVRowCodec::affine, 8, 64, 128}},
    {"affine4", {ops::KVRowCodec::affine, 4, 64, 128}, {ops::KVRowCodec::affine, 4, 64, 128}},
    {"turbo:k8v4", {ops::KVRowCodec::turbo_key, 8, 32, 128}, {ops::KVRowCodec::turbo_value, 4, 32, 128}},
    {"turbo k8v3", {ops::KVRowCodec::turbo_key, 8, 32, 128}, {ops::KVRowCodec::turbo_value, 3, 32, 128}},
    // Rotated keys: timed only where the fused read takes them (unless TERN_CUDA_KV_ROTATED_KEYS=0).
    {"turbo:k4v4", {ops::KVRowCodec::turbo_key, 4, 32, 128}, {ops::KVRowCodec::turbo_value, 4, 32, 128}},
    {"turbo:k3v3", {ops::KVRowCodec::turbo_key, 3, 32, 128}, {ops::KVRowCodec::turbo_value, 3, 32, 128}}};

// t [B, H, L, D] as packed rows [L, B, H, row bytes] on the GPU.
Tensor packed_rows(const Tensor& t, const ops::KVRowCodec& c) {
  Tensor rows = Tensor::empty({t.size(2), t.size(0), t.size(1), c.row_bytes()}, Dtype::u8, kGpu);
  ops::kv_encode(t, c, rows);
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  const bool kv_only = argc > 1 && !std::strcmp(argv[1], "--kv");
  const bool gemv_only = argc > 1 && !std::strcmp(argv[1], "--gemv");
  const bool decode_only = argc > 1 && !std::strcmp(argv[1], "--decode");
  const bool skinny = argc > 1 && !std::strcmp(argv[1], "--skinny");
  const bool kv_splits = argc > 1 && !std::strcmp(argv[1], "--kv-splits");
  const bool prefill_only = argc > 1 && !std::strcmp(argv[1], "--prefill");
  const bool sampling_only = argc > 1 && !std::strcmp(argv[1], "--sampling");
  const bool gemm_algos = argc > 1 && !std::strcmp(argv[1], "--gemm-algos");
  if (!cuda_available()) {
    std::printf("no CUDA device: %s\n", cuda_status().c_str());
    return 0;
  }
  cuda_init();
  std::printf("device: %s\n\n", cuda_device_name().c_str());

  {  // copy bandwidth: 2 GiB device-to-device, bytes read plus written
    const size_t n = size_t{1} << 31;
    Tensor a = Tensor::empty({static_cast<int64_t>(n)}, Dtype::u8, kGpu), b = Tensor::empty({static_cast<int64_t>(n)}, Dtype::u8, kGpu);
    TERN_CUDA_CHECK(cudaMemsetAsync(a.data_ptr(), 1, n, cuda::stream()));
    double t = time_it([&] {
      TERN_CUDA_CHECK(cudaMemcpyAsync(b.data_ptr(), a.data_ptr(), n, cudaMemcpyDeviceToDevice, cuda::stream()));
    });
    g_copy_bw = 2.0 * n / t;
    std::printf("%-44s %10.1f us  %7.0f GB/s (ceiling)\n", "copy 2 GiB d2d", t * 1e6, g_copy_bw / 1e9);
  }
  if (sampling_only) {  // the device sampler's ops on one Qwen3 vocabulary row
    std::printf("\n-- sampling ops on a [151936] f32 row: GPU time (events) and host wall time with the copy back --\n");
    const Tensor x = randn_gpu({151936}, Dtype::f32, 40);
    auto wall_us = [](auto&& fn) {
      for (int i = 0; i < 5; ++i) fn();
      std::vector<double> ts;
      for (int i = 0; i < 50; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        ts.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ts.begin(), ts.end());
      return ts[ts.size() / 2];
    };
    char name[128];
    for (int64_t k : {int64_t(1), int64_t(20), int64_t(1024)}) {
      std::snprintf(name, sizeof name, "topk k=%lld", (long long)k);
      row(name, time_it([&] { ops::topk(x, k); }), 4.0 * x.numel(), 0);
      std::printf("%-44s %10.1f us wall\n", "  + values and indices to the host",
                  wall_us([&] {
                    ops::TopK t = ops::topk(x, k);
                    t.values.to(Device::cpu());
                    t.indices.to(Device::cpu());
                  }));
    }
    row("draw_index", time_it([&] { ops::draw_index(x, 6.0f, 0.5f); }), 4.0 * x.numel(), 0);
    std::printf("%-44s %10.1f us wall\n", "  + the id to the host",
                wall_us([&] { ops::draw_index(x, 6.0f, 0.5f).to(Device::cpu()); }));
    // The nucleus mask on N(0, 1) logits (a flat row: tens of thousands of ids kept) and on a peaked one.
    const Tensor mx = ops::topk(x, 1).values;
    Tensor peaked = x.clone();
    peaked.narrow(0, 1000, 4).copy_from(Tensor::full({4}, 20.0f, Dtype::f32));
    const Tensor pmx = ops::topk(peaked, 1).values;
    // Narrow rows (N(0, 0.05) and N(0, 0.002)), as a random-weight checkpoint's logits are.
    for (float spread : {0.05f, 0.002f}) {
      const Tensor narrow = ops::scale(x, spread);
      const Tensor nmx = ops::topk(narrow, 1).values;
      std::snprintf(name, sizeof name, "top_p_mask p=0.90 N(0, %g)", spread);
      row(name, time_it([&] { ops::top_p_mask(narrow, nmx, 0.9f); }), 8.0 * x.numel(), 0);
    }
    for (float top_p : {0.5f, 0.9f, 0.95f}) {
      std::snprintf(name, sizeof name, "top_p_mask p=%.2f flat", top_p);
      row(name, time_it([&] { ops::top_p_mask(x, mx, top_p); }), 8.0 * x.numel(), 0);
      std::snprintf(name, sizeof name, "top_p_mask p=%.2f peaked", top_p);
      row(name, time_it([&] { ops::top_p_mask(peaked, pmx, top_p); }), 8.0 * x.numel(), 0);
    }
    row("log_softmax", time_it([&] { ops::log_softmax(x); }), 8.0 * x.numel(), 0);
    row("sum", time_it([&] { ops::sum(x, 0); }), 4.0 * x.numel(), 0);
    row("argmax", time_it([&] { ops::argmax(x); }), 4.0 * x.numel(), 0);
    std::printf("%-44s %10.1f us wall\n", "one f32 to the host", wall_us([&] { ops::sum(x, 0).to(Device::cpu()); }));
    return 0;
  }
  if (decode_only) {  // bf16 flash-decoding at Qwen3-8B heads: split counts and the two merges of the splits
    std::printf("\n-- sdpa decode (32 q, 8 kv heads, dim 128): splits x merge --\n");
    char name[128];
    for (int64_t B : {int64_t(1), int64_t(8)}) {
      for (int64_t Lk : {int64_t(4096), int64_t(32768)}) {
        const DecodeCase c = decode_case(B, Lk);
        for (int splits : {0, 8, 16, 24, 32, 40, 48, 49, 50, 56, 64}) {
          if (splits) setenv("TERN_CUDA_DECODE_SPLITS", std::to_string(splits).c_str(), 1);
          for (const char* merge : {"last-block", "launch"}) {
            setenv("TERN_CUDA_DECODE_COMBINE", merge, 1);
            std::snprintf(name, sizeof name, "B=%lld Lk=%lld splits=%s %s", (long long)B, (long long)Lk,
                          splits ? std::to_string(splits).c_str() : "auto", merge);
            row(name, time_it([&] { ops::sdpa(c.q, c.k, c.v, 0.088f, c.m); }), c.bytes(), 0);
          }
          unsetenv("TERN_CUDA_DECODE_SPLITS");
        }
        unsetenv("TERN_CUDA_DECODE_COMBINE");
      }
    }
    return 0;
  }
  if (skinny) {  // decode products of 8-64 rows, weights of enough layers that none stays in L2
    struct Product {
      const char* name;
      int64_t n, k, copies;
      bool gated;  // n counts the outputs; the weights stack 2n rows
    };
    const Product products[] = {{"8b qkv", 6144, 4096, 4, false},      {"8b o_proj", 4096, 4096, 4, false},
                                {"8b gate/up", 12288, 4096, 2, true},  {"8b down", 4096, 12288, 2, false},
                                {"0.6b qkv", 4096, 1024, 16, false},   {"0.6b o_proj", 1024, 2048, 32, false},
                                {"0.6b gate/up", 3072, 1024, 8, true}, {"0.6b down", 1024, 3072, 16, false}};
    char name[128];
    for (const Product& p : products) {
      std::vector<Tensor> w;
      for (int64_t c = 0; c < p.copies; ++c)
        w.push_back(randn_gpu({p.gated ? 2 * p.n : p.n, p.k}, Dtype::bf16, static_cast<uint32_t>(400 + c)));
      for (int64_t M : {int64_t(8), int64_t(16), int64_t(32), int64_t(64)}) {
        Tensor x = randn_gpu({M, p.k}, Dtype::bf16, 7);
        auto run = [&] {
          for (const Tensor& wc : w)
            p.gated ? (void)ops::gated_linear(x, wc, ops::UnaryOp::silu) : (void)ops::linear(x, wc);
        };
        for (const char* mode : {"cublaslt", "auto", "1", "2", "4", "8"}) {
          const bool forced = std::strcmp(mode, "cublaslt") && std::strcmp(mode, "auto");
          if (forced && M > 32) break;
          if (!forced) setenv("TERN_CUDA_MMA_GEMV", std::strcmp(mode, "auto") ? "0" : "", 1);
          if (forced) {
            setenv("TERN_CUDA_MMA_GEMV", "1", 1);
            setenv("TERN_CUDA_MMA_SPLITS", mode, 1);
          }
          std::snprintf(name, sizeof name, "%s M=%lld %s%s", p.name, (long long)M, forced ? "mma splits=" : "", mode);
          row(name, time_it(run) / p.copies, w[0].nbytes(), 0);
          unsetenv("TERN_CUDA_MMA_GEMV");
          unsetenv("TERN_CUDA_MMA_SPLITS");
        }
      }
    }
    return 0;
  }
  if (prefill_only) {  // flash prefill, causal, one sequence: rate over the visible (query, key) pairs
    std::printf("\n-- sdpa prefill (flash, causal) --\n");
    struct Heads {
      const char* name;
      int64_t hq, hkv, d, window;
    };
    char name[128];
    for (const Heads& h : {Heads{"8b 32/8 d128", 32, 8, 128, 0}, Heads{"0.6b 16/8 d128", 16, 8, 128, 0},
                           Heads{"qwen3.5-9b 16/4 d256", 16, 4, 256, 0},
                           Heads{"gemma4 sliding 8/2 d256 w512", 8, 2, 256, 512},
                           Heads{"gemma4 full 8/1 d512", 8, 1, 512, 0}}) {
      for (int64_t L : {int64_t(512), int64_t(2048), int64_t(8192)}) {
        Tensor q = randn_gpu({1, h.hq, L, h.d}, Dtype::bf16, 14);
        Tensor k = randn_gpu({1, h.hkv, L, h.d}, Dtype::bf16, 15);
        Tensor v = randn_gpu({1, h.hkv, L, h.d}, Dtype::bf16, 16);
        ops::AttentionMask m;
        m.window = h.window;
        double pairs = 0;  // visible (query, key) pairs
        for (int64_t i = 0; i < L; ++i) pairs += h.window > 0 ? std::min(i + 1, h.window) : i + 1;
        std::snprintf(name, sizeof name, "prefill %s L=%lld", h.name, (long long)L);
        row(name, time_it([&] { ops::sdpa(q, k, v, 0.088f, m); }, 10, 2), 0, 4.0 * h.hq * h.d * pairs);
      }
    }
    return 0;
  }
  if (kv_splits) {  // decode attention over quantized KV at Qwen3-8B heads: split counts, beside bf16
    const char* filter = argc > 2 ? argv[2] : "";
    auto kept = [&](const char* name) { return std::strstr(name, filter) != nullptr; };
    std::printf("\n-- quantized-KV decode (32 q, 8 kv heads, dim 128): splits --\n");
    char name[128];
    for (int64_t B : {int64_t(1), int64_t(8)}) {
      for (int64_t Lk : {int64_t(4096), int64_t(32768)}) {
        const DecodeCase c = decode_case(B, Lk);
        std::snprintf(name, sizeof name, "B=%lld Lk=%lld bf16 (sdpa)", (long long)B, (long long)Lk);
        if (kept(name)) row(name, time_it([&] { ops::sdpa(c.q, c.k, c.v, 0.088f, c.m); }), c.bytes(), 0);
        for (const KVScheme& sc : kKVSchemes) {
          if (!ops::kv_decode_attention_supported(sc.k, sc.v, kGpu)) continue;
          const Tensor kr = packed_rows(c.k, sc.k), vr = packed_rows(c.v, sc.v);
          for (int splits : {0, 8, 12, 16, 24, 32, 48, 64, 96}) {
            if (splits) setenv("TERN_CUDA_KV_SPLITS", std::to_string(splits).c_str(), 1);
            std::snprintf(name, sizeof name, "B=%lld Lk=%lld %s splits=%s", (long long)B, (long long)Lk, sc.name,
                          splits ? std::to_string(splits).c_str() : "auto");
            if (kept(name))
              row(name, time_it([&] { ops::kv_decode_attention(c.q, kr, sc.k, vr, sc.v, Tensor(), Tensor(), 0.088f); }),
                  kr.nbytes() + vr.nbytes() + 2.0 * c.q.nbytes(), 0);
            unsetenv("TERN_CUDA_KV_SPLITS");
          }
        }
      }
    }
    return 0;
  }
  if (gemm_algos) {  // cuBLASLt's candidate algorithms for the 8B decode products, weights out of L2
    struct Product {
      const char* name;
      int64_t n, k;
    };
    const Product products[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate/up", 24576, 4096},
                                {"down", 4096, 12288}, {"lm_head", 151936, 4096}};
    Tensor scratch = Tensor::empty({int64_t{256} << 20}, Dtype::u8, kGpu);
    const auto flush = [&] {
      TERN_CUDA_CHECK(cudaMemsetAsync(scratch.data_ptr(), 0, static_cast<size_t>(scratch.nbytes()), cuda::stream()));
    };
    for (const Product& pr : products) {
      for (int64_t M : {int64_t(8), int64_t(32), int64_t(64)}) {
        if (!std::strcmp(pr.name, "lm_head") && M != 32) continue;
        const Tensor w = randn_gpu({pr.n, pr.k}, Dtype::bf16, 50), x = randn_gpu({M, pr.k}, Dtype::bf16, 51);
        Tensor out = Tensor::empty({M, pr.n}, Dtype::bf16, kGpu);
        cuda::GemmDesc d;
        d.ab_dtype = d.c_dtype = Dtype::bf16;
        d.trans_a = true;
        d.m = pr.n, d.n = M, d.k = pr.k, d.lda = pr.k, d.ldb = pr.k, d.ldc = pr.n;
        std::printf("\n-- 8B %s, %lld rows: %lld x %lld weights --\n", pr.name, (long long)M, (long long)pr.n,
                    (long long)pr.k);
        const double bytes = 2.0 * pr.n * pr.k;
        int i = 0;
        for (const auto& t : cuda::gemm_algo_times(d, w.data_ptr(), x.data_ptr(), out.data_ptr(), cuda::stream(), 16,
                                                   9, flush)) {
          char name[160];
          std::snprintf(name, sizeof name, "%2d %s", i++, t.config.c_str());
          if (t.us > 0) {
            row(name, t.us * 1e-6, bytes, 0);
          } else {
            std::printf("%-44s failed to run\n", name);
          }
        }
      }
    }
    return 0;
  }
  if (gemv_only) {
    struct Shape4 {
      const char* name;
      int64_t hidden, qkv, attn, inter, layers;
    };
    // 30b-a3b: Qwen3-30B-A3B's attention products only (its MLP is the routed experts, timed below)
    for (const Shape4& d : {Shape4{"8b", 4096, 6144, 4096, 12288, 4}, Shape4{"0.6b", 1024, 4096, 2048, 3072, 8},
                            Shape4{"30b-a3b", 2048, 5120, 4096, 0, 6}}) {
      if (d.inter == 0) {
        std::vector<Tensor> qkv, o;
        for (int64_t l = 0; l < d.layers; ++l) {
          qkv.push_back(randn_gpu({d.qkv, d.hidden}, Dtype::bf16, static_cast<uint32_t>(200 + 2 * l)));
          o.push_back(randn_gpu({d.hidden, d.attn}, Dtype::bf16, static_cast<uint32_t>(201 + 2 * l)));
        }
        Tensor x = randn_gpu({1, d.hidden}, Dtype::bf16, 1), a = randn_gpu({1, d.attn}, Dtype::bf16, 2);
        char name[128];
        std::snprintf(name, sizeof name, "%s qkv alone", d.name);
        row(name, time_it([&] {
                    for (int64_t l = 0; l < d.layers; ++l) ops::linear(x, qkv[l]);
                  }) / d.layers,
            qkv[0].nbytes(), 0);
        std::snprintf(name, sizeof name, "%s o_proj alone", d.name);
        row(name, time_it([&] {
                    for (int64_t l = 0; l < d.layers; ++l) ops::linear(a, o[l]);
                  }) / d.layers,
            o[0].nbytes(), 0);
        continue;
      }
      std::vector<Tensor> qkv, o, up, down;
      for (int64_t l = 0; l < d.layers; ++l) {
        const auto seed = static_cast<uint32_t>(100 + 4 * l);
        qkv.push_back(randn_gpu({d.qkv, d.hidden}, Dtype::bf16, seed));
        o.push_back(randn_gpu({d.hidden, d.attn}, Dtype::bf16, seed + 1));
        up.push_back(randn_gpu({2 * d.inter, d.hidden}, Dtype::bf16, seed + 2));
        down.push_back(randn_gpu({d.hidden, d.inter}, Dtype::bf16, seed + 3));
      }
      Tensor x = randn_gpu({1, d.hidden}, Dtype::bf16, 1), a = randn_gpu({1, d.attn}, Dtype::bf16, 2);
      Tensor h = randn_gpu({1, d.inter}, Dtype::bf16, 3);
      const double layer_bytes = 2.0 * (d.qkv * d.hidden + d.hidden * d.attn + 3 * d.inter * d.hidden);
      char name[128];
      std::snprintf(name, sizeof name, "%s layer products (qkv, o, gate/up, down)", d.name);
      const double t = time_it([&] {
        for (int64_t l = 0; l < d.layers; ++l) {
          ops::linear(x, qkv[l]);
          ops::linear(a, o[l]);
          ops::gated_linear(x, up[l], ops::UnaryOp::silu);
          ops::linear(h, down[l]);
        }
      });
      row(name, t / d.layers, layer_bytes, 0);
      // the same with the residual add and RMSNorm launched before the q/k/v and gate/up products
      Tensor nw = randn_gpu({d.hidden}, Dtype::bf16, 4), res = randn_gpu({1, d.hidden}, Dtype::bf16, 5);
      std::snprintf(name, sizeof name, "%s layer products, add+norm separate", d.name);
      const double ts = time_it([&] {
        for (int64_t l = 0; l < d.layers; ++l) {
          ops::linear(ops::add_rms_norm(res, x, nw, 1e-6f).normed, qkv[l]);
          ops::linear(a, o[l]);
          ops::gated_linear(ops::add_rms_norm(res, x, nw, 1e-6f).normed, up[l], ops::UnaryOp::silu);
          ops::linear(h, down[l]);
        }
      });
      row(name, ts / d.layers, layer_bytes, 0);
      auto one = [&](const char* what, const std::function<void(int64_t)>& f, double bytes) {
        std::snprintf(name, sizeof name, "%s %s alone", d.name, what);
        row(name, time_it([&] {
                    for (int64_t l = 0; l < d.layers; ++l) f(l);
                  }) / d.layers,
            bytes, 0);
      };
      one(
          "qkv", [&](int64_t l) { ops::linear(x, qkv[l]); }, qkv[0].nbytes());
      one(
          "o_proj", [&](int64_t l) { ops::linear(a, o[l]); }, o[0].nbytes());
      one(
          "gate/up", [&](int64_t l) { ops::gated_linear(x, up[l], ops::UnaryOp::silu); }, up[0].nbytes());
      one(
          "down", [&](int64_t l) { ops::linear(h, down[l]); }, down[0].nbytes());
    }
    return 0;
  }
  if (!kv_only) {  // GEMM ceiling: bf16 8192^3
    const int64_t n = 8192;
    Tensor a = randn_gpu({n, n}, Dtype::bf16, 1), b = randn_gpu({n, n}, Dtype::bf16, 2);
    double t = time_it([&] { ops::matmul(a, b); }, 10, 2);
    g_gemm_flops = 2.0 * n * n * n / t;
    row("matmul bf16 8192^3", t, 0, 2.0 * n * n * n);
  }

  struct Dims {
    const char* name;
    int64_t hidden, inter, n_head, n_kv, head_dim, vocab;
  };
  const Dims dims[] = {{"8b", 4096, 12288, 32, 8, 128, 151936}, {"0.6b", 1024, 3072, 16, 8, 128, 151936}};
  for (const Dims& d : dims) {
    if (kv_only) break;
    std::printf("\n-- qwen3-%s shapes --\n", d.name);
    char name[128];
    for (int64_t T : {int64_t(1), int64_t(32), int64_t(2048)}) {
      if (quick && T == 32) continue;
      Tensor x = randn_gpu({T, d.hidden}, Dtype::bf16, 3);
      Tensor w_qkv = randn_gpu({(d.n_head + 2 * d.n_kv) * d.head_dim, d.hidden}, Dtype::bf16, 4);
      Tensor w_up = randn_gpu({2 * d.inter, d.hidden}, Dtype::bf16, 5);
      Tensor w_down = randn_gpu({d.hidden, d.inter}, Dtype::bf16, 6);
      for (auto* w : {&w_qkv, &w_up}) {
        const double bytes = w->nbytes() + x.nbytes() + T * w->size(0) * 2.0;
        std::snprintf(name, sizeof name, "linear T=%lld %lldx%lld", (long long)T, (long long)w->size(0),
                      (long long)w->size(1));
        row(name, time_it([&] { ops::linear(x, *w); }), bytes, 2.0 * T * w->size(0) * w->size(1));
      }
      Tensor h = randn_gpu({T, d.inter}, Dtype::bf16, 7);
      std::snprintf(name, sizeof name, "linear T=%lld down %lldx%lld", (long long)T, (long long)d.hidden,
                    (long long)d.inter);
      row(name, time_it([&] { ops::linear(h, w_down); }), w_down.nbytes() + h.nbytes() + T * d.hidden * 2.0,
          2.0 * T * d.hidden * d.inter);
      Tensor g = randn_gpu({T, d.inter}, Dtype::bf16, 8), u = randn_gpu({T, d.inter}, Dtype::bf16, 9);
      std::snprintf(name, sizeof name, "swiglu T=%lld", (long long)T);
      row(name, time_it([&] { ops::swiglu(g, u); }), 3.0 * g.nbytes(), 0);
      Tensor nw = randn_gpu({d.hidden}, Dtype::bf16, 10);
      std::snprintf(name, sizeof name, "rms_norm T=%lld", (long long)T);
      row(name, time_it([&] { ops::rms_norm(x, nw, 1e-6f); }), 2.0 * x.nbytes(), 0);
    }
    {
      Tensor logits = randn_gpu({1, d.vocab}, Dtype::f32, 11);
      row("argmax vocab f32", time_it([&] { ops::argmax(logits, -1); }), logits.nbytes(), 0);
      Tensor x = randn_gpu({1, d.hidden}, Dtype::bf16, 12), w = randn_gpu({d.vocab, d.hidden}, Dtype::bf16, 13);
      row("lm_head T=1", time_it([&] { ops::linear(x, w); }), w.nbytes(), 2.0 * d.vocab * d.hidden);
    }
    // attention: prefill (flash) and decode (split-K) on a cache-shaped K/V
    ops::RopeConfig rc;
    rc.head_dim = d.head_dim;
    rc.theta = 1e6;
    ops::RopeTable table = ops::rope_table(rc);
    for (int64_t L : {int64_t(512), int64_t(2048), int64_t(8192)}) {
      if (quick && L == 512) continue;
      Tensor q = randn_gpu({1, d.n_head, L, d.head_dim}, Dtype::bf16, 14);
      Tensor k = randn_gpu({1, d.n_kv, L, d.head_dim}, Dtype::bf16, 15);
      Tensor v = randn_gpu({1, d.n_kv, L, d.head_dim}, Dtype::bf16, 16);
      ops::AttentionMask m;
      const double flops = 4.0 * d.n_head * L * L * d.head_dim / 2;  // causal: half the square
      std::snprintf(name, sizeof name, "sdpa prefill L=%lld (causal)", (long long)L);
      row(name, time_it([&] { ops::sdpa(q, k, v, 0.088f, m); }, 10, 2), 0, flops);
      Tensor pos = Tensor::empty({L}, Dtype::i32);
      for (int64_t i = 0; i < L; ++i) pos.data<int32_t>()[i] = static_cast<int32_t>(i);
      Tensor pg = pos.to(kGpu);
      std::snprintf(name, sizeof name, "rope q L=%lld", (long long)L);
      row(name, time_it([&] { ops::rope(q, pg, table); }), 2.0 * q.nbytes(), 0);
    }
    for (int64_t B : {int64_t(1), int64_t(32)}) {
      for (int64_t Lk : {int64_t(128), int64_t(4096), int64_t(32768)}) {
        if (B * Lk > 32 * 4096) continue;
        Tensor q = randn_gpu({B, d.n_head, 1, d.head_dim}, Dtype::bf16, 17);
        Tensor k = randn_gpu({B, d.n_kv, Lk, d.head_dim}, Dtype::bf16, 18);
        Tensor v = randn_gpu({B, d.n_kv, Lk, d.head_dim}, Dtype::bf16, 19);
        ops::AttentionMask m;
        m.q_offset = Lk - 1;
        std::snprintf(name, sizeof name, "sdpa decode B=%lld Lk=%lld", (long long)B, (long long)Lk);
        row(name, time_it([&] { ops::sdpa(q, k, v, 0.088f, m); }), 2.0 * k.nbytes() + q.nbytes() * 2, 0);
      }
    }
  }
  {  // decode attention over quantized KV storage beside bf16, at Qwen3-8B heads (32 q, 8 kv, dim 128)
    std::printf("\n-- decode attention over quantized KV (qwen3-8b heads) --\n");
    char name[128];
    for (int64_t B : {int64_t(1), int64_t(8)}) {
      for (int64_t Lk : {int64_t(4096), int64_t(32768)}) {
        if (quick && Lk == 4096) continue;
        const DecodeCase c = decode_case(B, Lk);
        std::snprintf(name, sizeof name, "kv bf16 (sdpa) B=%lld Lk=%lld", (long long)B, (long long)Lk);
        row(name, time_it([&] { ops::sdpa(c.q, c.k, c.v, 0.088f, c.m); }), c.bytes(), 0);
        for (const KVScheme& sc : kKVSchemes) {
          if (!ops::kv_decode_attention_supported(sc.k, sc.v, kGpu)) continue;
          const Tensor kr = packed_rows(c.k, sc.k), vr = packed_rows(c.v, sc.v);
          std::snprintf(name, sizeof name, "kv %s B=%lld Lk=%lld", sc.name, (long long)B, (long long)Lk);
          row(name, time_it([&] { ops::kv_decode_attention(c.q, kr, sc.k, vr, sc.v, Tensor(), Tensor(), 0.088f); }),
              kr.nbytes() + vr.nbytes() + 2.0 * c.q.nbytes(), 0);
        }
        // The CUDA-core kernel (f32 queries take it) on the default TurboQuant storage, for reference.
        const KVScheme& turbo = kKVSchemes[3];
        const Tensor q32 = ops::cast(c.q, Dtype::f32), kr = packed_rows(c.k, turbo.k), vr = packed_rows(c.v, turbo.v);
        std::snprintf(name, sizeof name, "kv turbo k8v3 f32 q (cuda cores) B=%lld Lk=%lld", (long long)B, (long long)Lk);
        row(name, time_it([&] { ops::kv_decode_attention(q32, kr, turbo.k, vr, turbo.v, Tensor(), Tensor(), 0.088f); }),
            kr.nbytes() + vr.nbytes() + 4.0 * c.q.nbytes(), 0);
      }
    }
    // The window read's temporary (ops::kv_window_attention without the tiled read): a packed prefix of
    // 24,576 positions (the last chunk's of a 32k prefill in chunks of 8,192) decoded to bf16 at Qwen3-8B's
    // 8 kv heads, into positions [0, S) of a buffer with the chunk's 8,192 after them.
    std::printf("\n-- packed prefix decoded for a window read (8 kv heads, dim 128, 24,576 positions) --\n");
    const int64_t S = 24576, T = 8192;
    const Tensor x = randn_gpu({1, 8, S, 128}, Dtype::bf16, 17);
    Tensor buf = Tensor::empty({1, 8, S + T, 128}, Dtype::bf16, kGpu);
    Tensor head = buf.narrow(2, 0, S);
    for (const KVScheme& sc : kKVSchemes) {
      for (const ops::KVRowCodec* c : {&sc.k, &sc.v}) {
        const Tensor rows = packed_rows(x, *c);
        std::snprintf(name, sizeof name, "kv decode %s %s S=%lld", sc.name, c == &sc.k ? "keys" : "values",
                      (long long)S);
        row(name, time_it([&] { ops::kv_decode_into(rows, *c, head); }), rows.nbytes() + head.nbytes(), 0);
      }
    }
    // A prefill chunk's append: 8,192 positions of 8 kv heads of dim 128 encoded into packed rows.
    std::printf("\n-- a chunk's keys or values encoded (8 kv heads, dim 128, 8,192 positions) --\n");
    const Tensor chunk = x.narrow(2, 0, T);
    for (const KVScheme& sc : kKVSchemes) {
      for (const ops::KVRowCodec* c : {&sc.k, &sc.v}) {
        Tensor rows = Tensor::empty({T, 1, 8, c->row_bytes()}, Dtype::u8, kGpu);
        std::snprintf(name, sizeof name, "kv encode %s %s L=%lld", sc.name, c == &sc.k ? "keys" : "values",
                      (long long)T);
        row(name, time_it([&] { ops::kv_encode(chunk, *c, rows); }), chunk.nbytes() + rows.nbytes(), 0);
      }
    }
  }
  if (!kv_only) {  // routed experts at Qwen3-30B-A3B shapes: hidden 2048, moe_intermediate 768, 128 experts, top-8
    std::printf("\n-- qwen3-30b-a3b experts (128 x 768, top-8) --\n");
    const int64_t H = 2048, I = 768, E = 128, K = 8;
    Tensor gate_up = randn_gpu({E, 2 * I, H}, Dtype::bf16, 20), down = randn_gpu({E, H, I}, Dtype::bf16, 21);
    char name[128];
    for (int64_t T : {int64_t(1), int64_t(8), int64_t(32)}) {
      std::mt19937 rng(static_cast<uint32_t>(T));
      std::vector<int32_t> ids;
      std::vector<float> wts;
      std::vector<bool> used(static_cast<size_t>(E), false);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int32_t> pool(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) pool[e] = static_cast<int32_t>(e);
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int64_t j = 0; j < K; ++j) {
          ids.push_back(pool[j]);
          wts.push_back(1.0f / K);
          used[pool[j]] = true;
        }
      }
      const auto n_used = static_cast<double>(std::count(used.begin(), used.end(), true));
      Tensor x = randn_gpu({T, H}, Dtype::bf16, 22);
      Tensor ex = Tensor::from_vector(ids, {T, K}).to(kGpu), w = Tensor::from_vector(wts, {T, K}).to(kGpu);
      const double bytes = n_used * 3.0 * I * H * 2.0;  // the active experts' bf16 weights, each read once
      std::snprintf(name, sizeof name, "moe_experts T=%lld (%.0f experts, %.1f MB)", (long long)T, n_used, bytes / 1e6);
      row(name, time_it([&] { ops::moe_experts(x, ex, w, gate_up, down, ops::MoeActivation::swiglu); }), bytes,
          2.0 * T * K * 3.0 * I * H);
    }
  }
  std::printf("\nceilings: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", g_copy_bw / 1e9, g_gemm_flops / 1e12);
  return 0;
}
