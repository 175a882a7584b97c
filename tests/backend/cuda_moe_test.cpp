// ops::moe_experts and the router on the GPU against the CPU result (NMSE <= 1e-4 with bf16 experts):
// the grouped-GEMV decode path (T <= 8) and the sorted per-expert GEMM path, both activations, experts
// hit unevenly (some idle), dims the decode kernels cannot take, out-of-range ids on the device, and no
// cudaMalloc in a steady decode step. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/layers/moe.h"
#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"
#include "tern/ops/moe.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using namespace cuda_test;


class CudaMoe : public CudaTest {};

// k distinct experts per token; token t draws from the first max(k, E / 2) experts most of the time, so
// the load is uneven and (for E > 2k) the upper experts are mostly or wholly idle.
void uneven_route(int64_t T, int64_t k, int64_t E, uint32_t seed, std::vector<int32_t>& ids, std::vector<float>& wts) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  const int64_t hot = std::max<int64_t>(k, E / 2);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t reach = (t % 5 == 4) ? E : hot;
    std::vector<int32_t> pool(static_cast<size_t>(reach));
    for (int64_t e = 0; e < reach; ++e) pool[e] = static_cast<int32_t>(e);
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t j = 0; j < k; ++j) {
      ids.push_back(pool[j]);
      wts.push_back(u(rng));
    }
  }
}

struct Case {
  int64_t T, k, E, H, I;
  ops::MoeActivation act;
};

// CPU on f32 x holding bf16-rounded values and bf16 experts vs GPU on the bf16 x and experts.
void check_case(const Case& c, uint32_t seed) {
  std::vector<int32_t> ids;
  std::vector<float> wts;
  uneven_route(c.T, c.k, c.E, seed, ids, wts);
  Tensor xb = ops::cast(randn({c.T, c.H}, seed + 1, 1.0f), Dtype::bf16);
  Tensor gu = ops::cast(randn({c.E, 2 * c.I, c.H}, seed + 2, 1.0f / std::sqrt(float(c.H))), Dtype::bf16);
  Tensor dn = ops::cast(randn({c.E, c.H, c.I}, seed + 3, 1.0f / std::sqrt(float(c.I))), Dtype::bf16);
  Tensor e = Tensor::from_vector(ids, {c.T, c.k}), w = Tensor::from_vector(wts, {c.T, c.k});
  Tensor want = ops::moe_experts(ops::cast(xb, Dtype::f32), e, w, gu, dn, c.act);
  Tensor got = ops::moe_experts(xb.to(kGpu), e.to(kGpu), w.to(kGpu), gu.to(kGpu), dn.to(kGpu), c.act);
  ASSERT_TRUE(got.device().is_cuda());
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  ASSERT_EQ(got.dtype(), Dtype::f32);
  EXPECT_LE(nmse(want, got), 1e-4) << "T " << c.T << " k " << c.k << " E " << c.E << " H " << c.H << " I " << c.I
                                   << (c.act == ops::MoeActivation::swiglu ? " swiglu" : " geglu");
  // f32 activations take the same paths (cast to the experts' bf16 on the device).
  Tensor got_f32 = ops::moe_experts(ops::cast(xb, Dtype::f32).to(kGpu), e.to(kGpu), w.to(kGpu), gu.to(kGpu),
                                    dn.to(kGpu), c.act);
  EXPECT_LE(nmse(want, got_f32), 1e-4) << "f32 x, T " << c.T << " k " << c.k << " E " << c.E;
}

TEST_F(CudaMoe, ExpertsMatchCpuOverTokensSlotsAndExperts) {
  uint32_t seed = 10;
  for (int64_t T : {1, 2, 7, 64, 300}) {
    for (int64_t k : {1, 2, 8}) {
      for (int64_t E : {4, 16, 128}) {
        if (k > E) continue;
        for (auto act : {ops::MoeActivation::swiglu, ops::MoeActivation::geglu_tanh}) {
          check_case({T, k, E, 96, 40, act}, seed += 7);
        }
      }
    }
  }
}

TEST_F(CudaMoe, DecodeAtQwen3MoeWidths) {
  // hidden 2048 / inter 768 runs the four-loads-in-flight loop of the grouped GEMV (the small cases only
  // reach its tail loop); 8 experts keep the CPU reference quick.
  for (int64_t T : {1, 3, 8}) check_case({T, 4, 8, 2048, 768, ops::MoeActivation::swiglu}, 500 + T);
  check_case({2, 2, 8, 2048, 768, ops::MoeActivation::geglu_tanh}, 600);
}

TEST_F(CudaMoe, DimsOffTheGemvGridTakeTheSortedPath) {
  // hidden and inter not multiples of 8: the decode kernels decline and the sorted path runs even at T = 1.
  for (int64_t T : {1, 5, 33}) check_case({T, 2, 6, 20, 12, ops::MoeActivation::swiglu}, 700 + T);
}

// T tokens with one expert in range and one outside [0, E) per token, on the device (ids there are not
// read back): the out-of-range slot adds nothing. With check_bf16, the bf16 output is also the f32 one
// rounded once.
void check_out_of_range_ids(int64_t T, bool check_bf16) {
  const int64_t H = 64, I = 32, E = 8;
  Tensor gu = ops::cast(randn({E, 2 * I, H}, 1, 0.1f), Dtype::bf16), dn = ops::cast(randn({E, H, I}, 2, 0.2f), Dtype::bf16);
  Tensor xb = ops::cast(randn({T, H}, 3 + T, 1.0f), Dtype::bf16);
  std::vector<int32_t> ids, kept;
  std::vector<float> wts, kept_w;
  for (int64_t t = 0; t < T; ++t) {
    const auto a = static_cast<int32_t>(t % E);
    ids.insert(ids.end(), {a, t % 2 ? static_cast<int32_t>(E) : -1});
    wts.insert(wts.end(), {0.7f, 0.3f});
    kept.push_back(a);
    kept_w.push_back(0.7f);
  }
  Tensor want = ops::moe_experts(ops::cast(xb, Dtype::f32), Tensor::from_vector(kept, {T, 1}),
                                 Tensor::from_vector(kept_w, {T, 1}), gu, dn, ops::MoeActivation::swiglu);
  Tensor e = Tensor::from_vector(ids, {T, 2}).to(kGpu), w = Tensor::from_vector(wts, {T, 2}).to(kGpu);
  Tensor got = ops::moe_experts(xb.to(kGpu), e, w, gu.to(kGpu), dn.to(kGpu), ops::MoeActivation::swiglu);
  EXPECT_LE(nmse(want, got), 1e-4) << "T " << T;
  if (!check_bf16) return;
  Tensor got_bf16 =
      ops::moe_experts(xb.to(kGpu), e, w, gu.to(kGpu), dn.to(kGpu), ops::MoeActivation::swiglu, Dtype::bf16);
  EXPECT_EQ(ops::cast(got, Dtype::bf16).to(Device::cpu()).to_f32_vector(), got_bf16.to(Device::cpu()).to_f32_vector())
      << "T " << T;
}

TEST_F(CudaMoe, OutOfRangeIdOnDeviceContributesNothing) {
  for (int64_t T : {2, 40}) check_out_of_range_ids(T, false);  // the decode and the grouped paths
}

TEST_F(CudaMoe, RouterMatchesCpu) {
  // Logits spaced apart so no two experts of a row tie in f32: the same experts, weights within f32 rounding.
  for (int64_t E : {4, 16, 128}) {
    for (int64_t k : {1, 2, 8}) {
      if (k > E) continue;
      const int64_t T = 37;
      std::mt19937 rng(static_cast<uint32_t>(E * 10 + k));
      std::vector<float> v(static_cast<size_t>(T * E));
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int32_t> perm(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) perm[e] = static_cast<int32_t>(e);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t e = 0; e < E; ++e) v[t * E + e] = 0.05f * static_cast<float>(perm[e]) - 2.0f;
      }
      Tensor logits = Tensor::from_vector(v, {T, E});
      for (bool renorm : {false, true}) {
        RouterChoice want = route_top_k(logits, k, renorm);
        RouterChoice got = route_top_k(logits.to(kGpu), k, renorm);
        ASSERT_TRUE(got.experts.device().is_cuda());
        EXPECT_EQ(want.experts.to_f32_vector(), got.experts.to(Device::cpu()).to_f32_vector()) << "E " << E << " k " << k;
        EXPECT_LE(nmse(want.weights, got.weights), 1e-7) << "E " << E << " k " << k;
      }
    }
  }
}

TEST_F(CudaMoe, DecodeStepMakesNoCudaMallocInSteadyState) {
  // The routed decode step (router on the device, grouped GEMV) reuses cached blocks after warm-up.
  const int64_t T = 2, H = 64, I = 32, E = 16, K = 4;
  Tensor x = ops::cast(randn({T, H}, 1, 1.0f), Dtype::bf16).to(kGpu);
  Tensor router = ops::cast(randn({E, H}, 2, 0.2f), Dtype::bf16).to(kGpu);
  Tensor gu = ops::cast(randn({E, 2 * I, H}, 3, 0.1f), Dtype::bf16).to(kGpu);
  Tensor dn = ops::cast(randn({E, H, I}, 4, 0.2f), Dtype::bf16).to(kGpu);
  auto step = [&] {
    RouterChoice r = route_top_k(ops::linear(ops::cast(x, Dtype::f32), router), K, true);
    return ops::moe_experts(x, r.experts, r.weights, gu, dn, ops::MoeActivation::swiglu).to(Device::cpu());
  };
  step();
  step();
  const size_t before = cuda::allocator_stats().cuda_mallocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(cuda::allocator_stats().cuda_mallocs, before);
}

// The router's softmax top-k in one kernel (E <= 1024) and past it (the composed ops) against the CPU's
// softmax, topk and division: the same experts in the same order, the weights to f32 rounding.
TEST_F(CudaMoe, RouteMatchesSoftmaxTopK) {
  for (int64_t E : {8, 60, 128, 256, 1000, 1500}) {
    for (int64_t k : {1, 2, 8}) {
      for (bool renorm : {true, false}) {
        Tensor logits = randn({7, E}, static_cast<uint32_t>(80 + E + k), 2.0f);
        ops::MoeRoute want = ops::moe_route(logits, k, renorm);
        ops::MoeRoute got = ops::moe_route(logits.to(kGpu), k, renorm);
        ASSERT_EQ(got.experts.shape(), (Shape{7, k}));
        EXPECT_EQ(want.experts.to_f32_vector(), got.experts.to(Device::cpu()).to_f32_vector())
            << "E " << E << " k " << k << " renormalize " << renorm;
        EXPECT_LE(nmse(want.weights, got.weights), 1e-10) << "E " << E << " k " << k;
      }
    }
  }
  EXPECT_THROW(ops::moe_route(randn({2, 8}, 90).to(kGpu), 9, true), Error);
}

// The grouped products (the default for batches of 9 to 64 tokens: sorted by expert on the device, no
// host sync) and, with TERN_CUDA_MOE_GROUPED=0, cuBLASLt per expert, against the CPU: both activations,
// experts hit unevenly; out-of-range ids add nothing; a bf16 output is the f32 one rounded once.
TEST_F(CudaMoe, GroupedPathMatchesCpu) {
  uint32_t seed = 2000;
  ScopedEnv grouped_env("TERN_CUDA_MOE_GROUPED", nullptr);
  for (const char* grouped : {"1", "0"}) {
    grouped_env.set(grouped);
    for (int64_t T : {9, 32, 64}) {
      for (auto act : {ops::MoeActivation::swiglu, ops::MoeActivation::geglu_tanh}) {
        check_case({T, 8, 64, 256, 128, act}, seed += 11);
        check_case({T, 2, 4, 96, 40, act}, seed += 11);
      }
    }
    check_out_of_range_ids(40, true);
  }
}

// An f32 or bf16 output: the bf16 one is the f32 one rounded once, on the decode and the sorted paths.
TEST_F(CudaMoe, Bf16OutputIsTheF32OneRounded) {
  for (const Case& c :
       {Case{1, 8, 128, 2048, 768, ops::MoeActivation::swiglu}, Case{3, 2, 16, 96, 40, ops::MoeActivation::geglu_tanh},
        Case{40, 2, 16, 96, 40, ops::MoeActivation::swiglu}, Case{2, 2, 6, 20, 12, ops::MoeActivation::swiglu}}) {
    std::vector<int32_t> ids;
    std::vector<float> wts;
    uneven_route(c.T, c.k, c.E, 900, ids, wts);
    Tensor x = ops::cast(randn({c.T, c.H}, 901, 1.0f), Dtype::bf16).to(kGpu);
    Tensor gu = ops::cast(randn({c.E, 2 * c.I, c.H}, 902, 1.0f / std::sqrt(float(c.H))), Dtype::bf16).to(kGpu);
    Tensor dn = ops::cast(randn({c.E, c.H, c.I}, 903, 1.0f / std::sqrt(float(c.I))), Dtype::bf16).to(kGpu);
    Tensor e = Tensor::from_vector(ids, {c.T, c.k}).to(kGpu), w = Tensor::from_vector(wts, {c.T, c.k}).to(kGpu);
    Tensor f = ops::moe_experts(x, e, w, gu, dn, c.act);
    Tensor b = ops::moe_experts(x, e, w, gu, dn, c.act, Dtype::bf16);
    ASSERT_EQ(b.dtype(), Dtype::bf16);
    EXPECT_EQ(ops::cast(f, Dtype::bf16).to(Device::cpu()).to_f32_vector(), b.to(Device::cpu()).to_f32_vector())
        << "T " << c.T << " E " << c.E << " H " << c.H;
  }
}

// ops::moe_norm_route (one kernel for <= 4 bf16 rows, E <= 256) against pre_norm, the f32 router product
// and moe_route on the same device: the sums and normed rows bit for bit, the same experts, the weights to
// f32 rounding; past its limits (5 rows, 300 experts) the composed ops run. Called many times in a row,
// so a block counter left non-zero would fail the later calls. Both kernels: the cluster that routes in
// its first block (sm_90) and the grid that routes in its last (TERN_CUDA_MOE_ROUTE=atomic).
TEST_F(CudaMoe, NormRouteMatchesTheThreeOps) {
  uint32_t seed = 1000;
  ScopedEnv route_env("TERN_CUDA_MOE_ROUTE", nullptr);
  for (const char* route : {"cluster", "atomic"}) {
    SCOPED_TRACE(route);
    route_env.set(route);
    for (int64_t H : {64, 2048}) {
      for (int64_t E : {8, 60, 128, 256, 300}) {
        for (int64_t M : {1, 2, 4, 5}) {
          for (int variant = 0; variant < 3; ++variant) {  // delta and weight; weight only; neither
            const int64_t k = std::min<int64_t>(8, E / 2);
            ops::PreNorm in;
            in.x = ops::cast(randn({M, 1, H}, seed++, 1.0f), Dtype::bf16).to(kGpu);
            if (variant == 0) in.delta = ops::cast(randn({M, 1, H}, seed++, 0.5f), Dtype::bf16).to(kGpu);
            if (variant < 2) {
              std::vector<float> nw = randn({H}, seed++, 0.3f).to_f32_vector();
              for (float& v : nw) v += 1.0f;
              in.weight = ops::cast(Tensor::from_vector(nw, {H}), Dtype::bf16).to(kGpu);
            }
            in.eps = 1e-6f;
            Tensor router = ops::cast(randn({E, H}, seed++, 1.0f / std::sqrt(float(H))), Dtype::bf16).to(kGpu);
            const std::string what = "H " + std::to_string(H) + " E " + std::to_string(E) + " M " + std::to_string(M) +
                                     " variant " + std::to_string(variant);
            ops::MoeNormRoute got = ops::moe_norm_route(in, router, k, true);
            ops::AddNorm a = ops::pre_norm(in);
            ops::MoeRoute want = ops::moe_route(ops::linear(a.normed.reshape({M, H}), router, {}, Dtype::f32), k, true);
            ASSERT_EQ(got.normed.shape(), in.x.shape()) << what;
            EXPECT_EQ(a.sum.to(Device::cpu()).to_f32_vector(), got.sum.to(Device::cpu()).to_f32_vector()) << what;
            EXPECT_EQ(a.normed.to(Device::cpu()).to_f32_vector(), got.normed.to(Device::cpu()).to_f32_vector()) << what;
            // The router products sum in different orders: a slot may swap two experts whose probabilities
            // tie to f32 rounding, and nothing else.
            const std::vector<float> we = want.experts.to(Device::cpu()).to_f32_vector();
            const std::vector<float> ge = got.experts.to(Device::cpu()).to_f32_vector();
            const std::vector<float> ww = want.weights.to(Device::cpu()).to_f32_vector();
            const std::vector<float> gw = got.weights.to(Device::cpu()).to_f32_vector();
            ASSERT_EQ(we.size(), ge.size()) << what;
            for (size_t i = 0; i < we.size(); ++i) {
              EXPECT_TRUE(we[i] == ge[i] || std::fabs(ww[i] - gw[i]) < 1e-6f)
                  << what << " slot " << i << ": expert " << ge[i] << " for " << we[i];
              EXPECT_NEAR(ww[i], gw[i], 1e-5f) << what << " slot " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
