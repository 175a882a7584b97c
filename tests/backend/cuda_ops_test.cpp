// test-backend-ops for CUDA: every op of the foundation on the GPU against the CPU result over random
// shapes, strides and dtypes (NMSE <= 1e-7 in f32, <= 1e-4 in bf16). Attention is in cuda_attention_test.cpp. Skips
// cleanly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/gated_linear.h"
#include "tern/ops/index.h"
#include "tern/ops/matmul.h"
#include "tern/ops/norm.h"
#include "tern/ops/norm_linear.h"
#include "tern/ops/reduce.h"
#include "tern/ops/rope.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using cuda_test::randint;
using cuda_test::ScopedEnv;

const Device kGpu = Device::cuda(0);

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_status();
    cuda_init();
  }
};

Tensor randn(const Shape& shape, Dtype dtype, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = dist(rng);
  Tensor t = Tensor::from_vector(v, shape);
  return dtype == Dtype::f32 ? t : ops::cast(t, dtype);
}

double nmse(const Tensor& ref, const Tensor& got) {
  EXPECT_EQ(shape_str(ref.shape()), shape_str(got.shape()));
  EXPECT_EQ(dtype_name(ref.dtype()), dtype_name(got.dtype()));
  std::vector<float> r = ref.to_f32_vector(), g = got.device().is_cpu() ? got.to_f32_vector()
                                                                         : got.to(Device::cpu()).to_f32_vector();
  if (r.size() != g.size()) return 1e30;
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i]) != std::isnan(g[i])) return 1e30;
    if (std::isnan(r[i])) continue;
    if (std::isinf(r[i]) || std::isinf(g[i])) {
      if (r[i] != g[i]) return 1e30;
      continue;
    }
    num += (double(r[i]) - g[i]) * (double(r[i]) - g[i]);
    den += double(r[i]) * r[i];
  }
  return den > 0 ? num / den : num;
}

double tol(Dtype d) { return d == Dtype::f32 ? 1e-7 : 1e-4; }

#define EXPECT_CLOSE(ref, got, dtype) EXPECT_LE(nmse(ref, got), tol(dtype)) << "dtype " << dtype_name(dtype)

const Dtype kFloat[] = {Dtype::f32, Dtype::bf16};

TEST_F(CudaOps, CopiesRoundTripStridedViews) {
  Tensor x = randn({4, 6, 8}, Dtype::f32, 1);
  Tensor g = x.to(kGpu);
  EXPECT_EQ(nmse(x, g), 0.0);
  Tensor tx = x.transpose(0, 2).slice(1, 1, 5, 2);
  Tensor tg = g.transpose(0, 2).slice(1, 1, 5, 2);
  EXPECT_EQ(nmse(tx.contiguous(), tg.contiguous()), 0.0);
  Tensor dst = Tensor::zeros({8, 6, 4}, Dtype::f32, kGpu);
  dst.transpose(0, 2).copy_from(g);
  EXPECT_EQ(nmse(x.transpose(0, 2).contiguous(), dst), 0.0);
}

// Views whose innermost dim is whole 16-byte vectors take the vector copy and gated kernels; the same
// views shifted off the 16-byte alignment take the element kernels. Both against the CPU.
TEST_F(CudaOps, VectorAndElementPathsOfCopyAndGated) {
  for (Dtype dt : kFloat) {
    // a [B, L, H, D] projection seen as [B, H, L, D], as the KV append copies it, into a cache slice
    Tensor x = randn({2, 9, 3, 16}, dt, 13), xg = x.to(kGpu);
    EXPECT_EQ(nmse(x.transpose(1, 2).contiguous(), xg.transpose(1, 2).contiguous()), 0.0);
    Tensor cache = Tensor::zeros({2, 3, 20, 16}, dt, kGpu), ref = Tensor::zeros({2, 3, 20, 16}, dt);
    Tensor dg = cache.slice(2, 5, 14), dc = ref.slice(2, 5, 14);
    dg.copy_from(xg.transpose(1, 2));
    dc.copy_from(x.transpose(1, 2));
    EXPECT_EQ(nmse(ref, cache), 0.0);
    // an odd start column: 2- or 4-byte aligned only
    Tensor odd = xg.view({2, 9, 48}).slice(2, 1, 41), odd_ref = x.view({2, 9, 48}).slice(2, 1, 41);
    EXPECT_EQ(nmse(odd_ref.contiguous(), odd.contiguous()), 0.0);
    // the gated MLP's stacked [gate | up] rows, then the same halves shifted by one column
    Tensor y = randn({7, 2 * 304 + 1}, dt, 14), yg = y.to(kGpu);
    for (int64_t at : {0, 1}) {
      Tensor g = y.narrow(1, at, 304), u = y.narrow(1, at + 304, 304);
      Tensor gg = yg.narrow(1, at, 304), ug = yg.narrow(1, at + 304, 304);
      EXPECT_CLOSE(ops::swiglu(g, u), ops::swiglu(gg, ug), dt) << "at " << at;
      EXPECT_CLOSE(ops::geglu(g, u, true), ops::geglu(gg, ug, true), dt) << "at " << at;
    }
  }
}

TEST_F(CudaOps, BinaryBroadcastAndStrides) {
  const ops::BinaryOp all[] = {ops::BinaryOp::add, ops::BinaryOp::sub, ops::BinaryOp::mul,
                               ops::BinaryOp::div, ops::BinaryOp::maximum, ops::BinaryOp::minimum};
  for (Dtype dt : kFloat) {
    for (auto op : all) {
      Tensor a = randn({3, 1, 5, 7}, dt, 2), b = randn({4, 1, 7}, dt, 3);
      if (op == ops::BinaryOp::div) b = ops::affine(ops::unary(b, ops::UnaryOp::abs), 1.0f, 0.5f);
      EXPECT_CLOSE(ops::binary(a, b, op), ops::binary(a.to(kGpu), b.to(kGpu), op), dt);
      Tensor c = randn({7, 5}, dt, 4).transpose(0, 1), d = randn({5, 7}, dt, 5);
      EXPECT_CLOSE(ops::binary(c, d, op), ops::binary(c.to(kGpu).contiguous().transpose(0, 1).transpose(0, 1),
                                                       d.to(kGpu), op), dt);
      Tensor cg = randn({7, 5}, dt, 4).to(kGpu).transpose(0, 1);
      EXPECT_CLOSE(ops::binary(c, d, op), ops::binary(cg, d.to(kGpu), op), dt);
    }
  }
  Tensor ia = randint({6, 9}, 100, Dtype::i32, 6), ib = randint({9}, 100, Dtype::i32, 7);
  EXPECT_EQ(nmse(ops::add(ia, ib), ops::add(ia.to(kGpu), ib.to(kGpu))), 0.0);
}

TEST_F(CudaOps, BinaryInPlace) {
  Tensor a = randn({8, 16}, Dtype::f32, 8), b = randn({16}, Dtype::f32, 9);
  Tensor ag = a.to(kGpu);
  ops::binary_(a, b, ops::BinaryOp::add);
  ops::binary_(ag, b.to(kGpu), ops::BinaryOp::add);
  EXPECT_CLOSE(a, ag, Dtype::f32);
}

TEST_F(CudaOps, UnaryAffineSoftcapGated) {
  const ops::UnaryOp all[] = {ops::UnaryOp::neg,     ops::UnaryOp::exp,       ops::UnaryOp::log,
                              ops::UnaryOp::sqrt,    ops::UnaryOp::rsqrt,     ops::UnaryOp::tanh,
                              ops::UnaryOp::sigmoid, ops::UnaryOp::silu,      ops::UnaryOp::gelu_tanh,
                              ops::UnaryOp::gelu_erf, ops::UnaryOp::relu,     ops::UnaryOp::softplus,
                              ops::UnaryOp::abs,     ops::UnaryOp::square};
  for (Dtype dt : kFloat) {
    Tensor x = randn({5, 33, 17}, dt, 10, 2.0f);
    Tensor pos = ops::affine(ops::unary(x, ops::UnaryOp::abs), 1.0f, 0.25f);
    for (auto op : all) {
      bool needs_pos = op == ops::UnaryOp::log || op == ops::UnaryOp::sqrt || op == ops::UnaryOp::rsqrt;
      Tensor in = needs_pos ? pos : x;
      EXPECT_CLOSE(ops::unary(in, op), ops::unary(in.to(kGpu), op), dt) << "op " << static_cast<int>(op);
      Tensor view = in.transpose(0, 2);
      EXPECT_CLOSE(ops::unary(view, op), ops::unary(in.to(kGpu).transpose(0, 2), op), dt);
    }
    EXPECT_CLOSE(ops::affine(x, 0.7f, -1.5f), ops::affine(x.to(kGpu), 0.7f, -1.5f), dt);
    EXPECT_CLOSE(ops::softcap(x, 3.0f), ops::softcap(x.to(kGpu), 3.0f), dt);
    Tensor g = randn({7, 300}, dt, 11), u = randn({7, 300}, dt, 12);
    EXPECT_CLOSE(ops::swiglu(g, u), ops::swiglu(g.to(kGpu), u.to(kGpu)), dt);
    EXPECT_CLOSE(ops::geglu(g, u, true), ops::geglu(g.to(kGpu), u.to(kGpu), true), dt);
    EXPECT_CLOSE(ops::geglu(g, u, false), ops::geglu(g.to(kGpu), u.to(kGpu), false), dt);
  }
}

TEST_F(CudaOps, Cast) {
  Tensor x = randn({9, 31}, Dtype::f32, 13, 50.0f);
  for (Dtype to : {Dtype::bf16, Dtype::f16, Dtype::i32, Dtype::i64}) {
    Tensor c = ops::cast(x, to), g = ops::cast(x.to(kGpu), to);
    EXPECT_EQ(nmse(c, g), 0.0) << dtype_name(to);
    EXPECT_EQ(nmse(ops::cast(c, Dtype::f32), ops::cast(c.to(kGpu), Dtype::f32)), 0.0) << dtype_name(to);
  }
  EXPECT_EQ(nmse(ops::cast(x.transpose(0, 1), Dtype::bf16), ops::cast(x.to(kGpu).transpose(0, 1), Dtype::bf16)), 0.0);
}

TEST_F(CudaOps, RmsNorm) {
  for (Dtype dt : kFloat) {
    for (int64_t d : {64, 100, 128, 1000, 4096, 10000}) {  // 100: not whole vectors; 10,000: past the register kernels
      Tensor x = randn({3, 5, d}, dt, 14, 3.0f);
      for (Dtype wt : {Dtype::f32, Dtype::bf16}) {
        Tensor w = randn({d}, wt, 15);
        EXPECT_CLOSE(ops::rms_norm(x, w, 1e-6f), ops::rms_norm(x.to(kGpu), w.to(kGpu), 1e-6f), dt);
      }
      EXPECT_CLOSE(ops::rms_norm(x, Tensor(), 1e-5f), ops::rms_norm(x.to(kGpu), Tensor(), 1e-5f), dt);
      Tensor view = randn({5, 3, d}, dt, 16).transpose(0, 1);
      Tensor w = randn({d}, Dtype::f32, 17);
      EXPECT_CLOSE(ops::rms_norm(view, w, 1e-6f),
                   ops::rms_norm(randn({5, 3, d}, dt, 16).to(kGpu).transpose(0, 1), w.to(kGpu), 1e-6f), dt);
    }
  }
}

// The residual add and norm in one pass (both kernels: rows up to 8,192 held in registers, and wider).
TEST_F(CudaOps, AddRmsNorm) {
  for (Dtype dt : kFloat) {
    for (int64_t d : {64, 1000, 4096, 10000}) {
      Tensor x = randn({1, 3, d}, dt, 30, 2.0f), delta = randn({1, 3, d}, dt, 31), w = randn({d}, dt, 32);
      ops::AddNorm ref = ops::add_rms_norm(x, delta, w, 1e-6f);
      ops::AddNorm got = ops::add_rms_norm(x.to(kGpu), delta.to(kGpu), w.to(kGpu), 1e-6f);
      EXPECT_CLOSE(ref.sum, got.sum, dt) << "d " << d;
      EXPECT_CLOSE(ref.normed, got.normed, dt) << "d " << d;
    }
  }
}

TEST_F(CudaOps, Rope) {
  std::vector<ops::RopeConfig> cfgs(4);
  cfgs[0].head_dim = 64;
  cfgs[1].head_dim = 128, cfgs[1].theta = 1e6, cfgs[1].rotary_dim = 32;
  cfgs[2].head_dim = 128, cfgs[2].type = "llama3", cfgs[2].theta = 5e5, cfgs[2].factor = 8,
  cfgs[2].original_max_position = 8192;
  cfgs[3].head_dim = 64, cfgs[3].type = "yarn", cfgs[3].factor = 4, cfgs[3].original_max_position = 4096;
  for (Dtype dt : kFloat) {
    for (const auto& cfg : cfgs) {
      ops::RopeTable table = ops::rope_table(cfg);
      Tensor x = randn({2, 3, 7, cfg.head_dim}, dt, 18);
      Tensor pos = randint({7}, 4000, Dtype::i32, 19);
      EXPECT_CLOSE(ops::rope(x, pos, table), ops::rope(x.to(kGpu), pos.to(kGpu), table), dt) << cfg.type;
      Tensor pos2 = randint({2, 7}, 4000, Dtype::i64, 20);
      EXPECT_CLOSE(ops::rope(x, pos2, table), ops::rope(x.to(kGpu), pos2.to(kGpu), table), dt) << cfg.type;
      Tensor xt = randn({2, 7, 3, cfg.head_dim}, dt, 21).transpose(1, 2);
      EXPECT_CLOSE(ops::rope(xt, pos, table),
                   ops::rope(randn({2, 7, 3, cfg.head_dim}, dt, 21).to(kGpu).transpose(1, 2), pos.to(kGpu), table),
                   dt);
    }
  }
}

// The fused q/k norm and rotation against the CPU's rms_norm then rope, on the strided views attention
// layers pass (heads of one projection output), partial rotary, per-row positions and a scale-free norm.
// The gated MLP's first half on the GPU (one kernel for decode-sized bf16 rows, linear then the gated op
// otherwise) against the CPU's linear, split and swiglu / geglu.
TEST_F(CudaOps, GatedLinearMatchesLinearThenGate) {
  // (in, inter): rows split over 4, 1 and 2 warps with four loads in flight, and over 1 with eight
  for (auto [in, inter] :
       {std::pair<int64_t, int64_t>{1024 + 64, 300}, {1024 + 64, 2100}, {2048, 1100}, {4096, 2100}}) {
    Tensor w = randn({2 * inter, in}, Dtype::bf16, 50, 0.05f);
    Tensor wg = w.to(kGpu);
    for (int64_t rows : {1, 2, 3, 4, 5}) {
      for (ops::UnaryOp act : {ops::UnaryOp::silu, ops::UnaryOp::gelu_tanh, ops::UnaryOp::gelu_erf}) {
        Tensor x = randn({rows, 1, in}, Dtype::bf16, 51 + static_cast<uint32_t>(rows));
        Tensor y = ops::linear(x, w);
        Tensor g = y.narrow(-1, 0, inter), u = y.narrow(-1, inter, inter);
        Tensor ref = act == ops::UnaryOp::silu ? ops::swiglu(g, u) : ops::geglu(g, u, act == ops::UnaryOp::gelu_tanh);
        Tensor got = ops::gated_linear(x.to(kGpu), wg, act);
        ASSERT_EQ(got.shape(), (Shape{rows, 1, inter}));
        EXPECT_CLOSE(ref, got, Dtype::bf16)
            << "rows " << rows << " act " << static_cast<int>(act) << " in " << in << " inter " << inter;
      }
    }
    EXPECT_THROW(ops::gated_linear(randn({1, in}, Dtype::bf16, 60).to(kGpu), wg, ops::UnaryOp::exp), Error);
  }
}

// A sub-layer's entry (residual add, RMSNorm, then the q/k/v or gate/up product) on the GPU against the
// CPU's add_rms_norm then linear / gated_linear: decode-sized row counts, with and without the residual
// delta and the norm's weight, at rows of 1,088 to 4,096.
TEST_F(CudaOps, NormLinearMatchesNormThenLinear) {
  struct Case {
    int64_t in, out;
    bool gated, delta, weight;
  };
  const Case cases[] = {{1024 + 64, 700, false, true, true}, {2048, 4200, false, false, true},
                        {2048, 2100, false, true, false},    {1024 + 64, 300, true, true, true},
                        {2048, 2100, true, true, true},      {1024, 1100, true, false, false},
                        {4096, 2100, true, true, true},      {4096, 700, false, true, true}};
  for (const Case& c : cases) {
    Tensor w = randn({c.gated ? 2 * c.out : c.out, c.in}, Dtype::bf16, 120, 0.05f), wg = w.to(kGpu);
    Tensor nw = c.weight ? randn({c.in}, Dtype::bf16, 121) : Tensor();
    for (int64_t rows : {1, 2, 3, 4, 5}) {
      Tensor x = randn({rows, 1, c.in}, Dtype::bf16, 122 + static_cast<uint32_t>(rows));
      Tensor d = c.delta ? randn({rows, 1, c.in}, Dtype::bf16, 130 + static_cast<uint32_t>(rows)) : Tensor();
      const ops::PreNorm cpu{x, d, nw, 1e-6f};
      const ops::PreNorm gpu{x.to(kGpu), c.delta ? d.to(kGpu) : Tensor(), c.weight ? nw.to(kGpu) : Tensor(), 1e-6f};
      ops::AddNorm ref = ops::pre_norm(cpu);
      Tensor want = c.gated ? ops::gated_linear(ref.normed, w, ops::UnaryOp::silu) : ops::linear(ref.normed, w);
      ops::NormedProduct got =
          c.gated ? ops::norm_gated_linear(gpu, wg, ops::UnaryOp::silu) : ops::norm_linear(gpu, wg);
      ASSERT_EQ(got.out.shape(), want.shape());
      EXPECT_CLOSE(want, got.out, Dtype::bf16) << "in " << c.in << " out " << c.out << " rows " << rows;
      EXPECT_CLOSE(ref.sum, got.sum, Dtype::bf16) << "in " << c.in << " rows " << rows;
    }
  }
  // a norm weight of the wrong length is an error, not a read past its end
  EXPECT_THROW(ops::norm_linear(ops::PreNorm{randn({1, 64}, Dtype::bf16, 142).to(kGpu), Tensor(),
                                             randn({72}, Dtype::bf16, 143).to(kGpu)},
                                randn({6, 64}, Dtype::bf16, 144).to(kGpu)),
               Error);
  EXPECT_THROW(ops::norm_gated_linear(ops::PreNorm{randn({1, 64}, Dtype::bf16, 140).to(kGpu)},
                                      randn({6, 64}, Dtype::bf16, 141).to(kGpu), ops::UnaryOp::exp),
               Error);
}

TEST_F(CudaOps, SoftmaxAndReductions) {
  for (Dtype dt : kFloat) {
    for (Shape s : {Shape{4, 7, 33}, Shape{2, 5000}, Shape{3, 151936}}) {
      Tensor x = randn(s, dt, 22, 4.0f);
      Tensor xg = x.to(kGpu);
      for (int64_t dim : {int64_t(-1), int64_t(-2)}) {
        SCOPED_TRACE(shape_str(s) + " dim " + std::to_string(dim));
        EXPECT_CLOSE(ops::softmax(x, dim), ops::softmax(xg, dim), dt);
        EXPECT_CLOSE(ops::log_softmax(x, dim), ops::log_softmax(xg, dim), dt);
        EXPECT_CLOSE(ops::sum(x, dim), ops::sum(xg, dim), dt);
        EXPECT_CLOSE(ops::mean(x, dim, true), ops::mean(xg, dim, true), dt);
        EXPECT_CLOSE(ops::max(x, dim), ops::max(xg, dim), dt);
        EXPECT_EQ(nmse(ops::argmax(x, dim), ops::argmax(xg, dim)), 0.0);
      }
      if (dt == Dtype::f32 && s.size() == 2) {  // the greedy choice of a compiled step: [B, n] f32 rows
        const int64_t rows = s[0];
        Tensor ids = Tensor::empty({rows}, Dtype::i32), lp = Tensor::empty({rows}, Dtype::f32);
        Tensor ids_g = Tensor::empty({rows}, Dtype::i32, kGpu), lp_g = Tensor::empty({rows}, Dtype::f32, kGpu);
        ops::greedy_choice(x, ids, lp);
        ops::greedy_choice(xg, ids_g, lp_g);
        EXPECT_EQ(nmse(ids, ids_g), 0.0);
        EXPECT_CLOSE(lp, lp_g, dt);
      }
      for (int64_t k : {int64_t(1), int64_t(5), int64_t(40), int64_t(1024)}) {
        if (k > s.back()) continue;
        ops::TopK c = ops::topk(x, k), g = ops::topk(xg, k);
        EXPECT_EQ(nmse(c.values, g.values), 0.0);
        EXPECT_EQ(nmse(c.indices, g.indices), 0.0);
      }
    }
  }
}

// Teacher-forced log-probabilities (tern score) on the GPU against the CPU's double log-sum-exp: one row
// to many, vocab sizes up to Qwen3's and Gemma's, f32 and bf16 logits, targets anywhere in the row.
TEST_F(CudaOps, TokenLogprobsMatchCpu) {
  for (Dtype dt : kFloat) {
    for (Shape s : {Shape{1, 5}, Shape{7, 1000}, Shape{300, 4099}, Shape{3, 151936}, Shape{2, 262144}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(s));
      Tensor x = randn(s, dt, 23, 4.0f);
      std::vector<int32_t> t(static_cast<size_t>(s[0]));
      for (size_t r = 0; r < t.size(); ++r) t[r] = static_cast<int32_t>((r * 7919 + 13) % s[1]);
      t.back() = static_cast<int32_t>(s[1] - 1);
      const Tensor ids = Tensor::from_vector(t, {s[0]});
      const Tensor c = ops::token_logprobs(x, ids), g = ops::token_logprobs(x.to(kGpu), ids);
      ASSERT_TRUE(g.device().is_cuda());
      const Tensor gh = g.to(Device::cpu());
      for (int64_t r = 0; r < s[0]; ++r) {
        const float want = c.data<float>()[r];
        EXPECT_NEAR(gh.data<float>()[r], want, 2e-5f * std::max(1.0f, std::fabs(want))) << "row " << r;
      }
    }
  }
}

// The two-stage top-k of long rows (kernels/topk.cuh) on what decides its ranks: many ties (values
// on a coarse grid), NaN (first), +-inf, -0 beside +0, a row of -inf with a few numbers, a constant
// row; k up to 1024, several slices and a short last one. The CPU's order, value and index.
TEST_F(CudaOps, TopkOfLongRowsWithTiesAndSpecials) {
  const int64_t n = 70001;
  std::mt19937 rng(41);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(5 * n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::round(dist(rng) * 2.0f) / 2.0f;  // ties everywhere
  for (int64_t i = n; i < 2 * n; ++i) v[i] = dist(rng);
  for (int64_t i : {n + 7, n + 9000, 2 * n - 1}) v[i] = NAN;
  for (int64_t i : {n + 3, n + 60000}) v[i] = INFINITY;
  for (int64_t i = n + 100; i < n + 5000; i += 3) v[i] = -INFINITY;
  for (int64_t i = n + 20000; i < n + 21000; ++i) v[i] = (i % 2) ? 0.0f : -0.0f;
  for (int64_t i = 2 * n; i < 3 * n; ++i) v[i] = -INFINITY;
  for (int64_t i : {2 * n + 5, 2 * n + 40000, 3 * n - 2}) v[i] = 1.5f;
  for (int64_t i = 3 * n; i < 4 * n; ++i) v[i] = 0.25f;
  for (int64_t i = 4 * n; i < 5 * n; ++i) v[i] = -static_cast<float>(i % 977);
  Tensor x32 = Tensor::from_vector(v, {5, n});
  for (Dtype dt : kFloat) {
    Tensor x = dt == Dtype::f32 ? x32 : ops::cast(x32, dt);
    Tensor xg = x.to(kGpu);
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(20), int64_t(257), int64_t(1000), int64_t(1024)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " k " + std::to_string(k));
      ops::TopK c = ops::topk(x, k), g = ops::topk(xg, k);
      EXPECT_EQ(nmse(c.indices, g.indices), 0.0);
      EXPECT_EQ(nmse(c.values, g.values), 0.0);
    }
  }
}

// The sampler's row draw on the GPU against the CPU: the same id for every row and u, on rows with
// -inf holes, weights that underflow to 0, one chunk and many (short last ones too); and at the point
// where exp_f32 * 2^40 crosses 1 (u = 0 draws the first id that weighs anything), which only the same
// exp bits reproduce.
TEST_F(CudaOps, DrawIndexMatchesCpu) {
  std::mt19937 gen(43);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(2047), int64_t(2048), int64_t(2049), int64_t(151936),
                    int64_t(262144)}) {
    for (float spread : {0.5f, 4.0f, 40.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::bernoulli_distribution hole(0.2);
      std::vector<float> l(static_cast<size_t>(n));
      for (float& x : l) x = hole(gen) ? -INFINITY : dist(gen);
      l[static_cast<size_t>(n / 3)] = spread;  // at least one finite logit
      const float m = *std::max_element(l.begin(), l.end());
      Tensor row = Tensor::from_vector(l, {n});
      Tensor rg = row.to(kGpu);
      std::vector<float> us = {0.0f, std::nextafter(1.0f, 0.0f), 0.5f};
      for (int i = 0; i < 60; ++i) us.push_back(std::min(uni(gen), std::nextafter(1.0f, 0.0f)));
      for (float u : us) {
        EXPECT_EQ(ops::draw_index(row, m, u).item<int32_t>(), ops::draw_index(rg, m, u).to(Device::cpu()).item<int32_t>())
            << "n " << n << " spread " << spread << " u " << u;
      }
    }
  }
  // 4096 consecutive floats from below log(2^-40) up, then the max (0): u = 0 draws the first whose
  // weight floor(exp_f32(x) * 2^40) is 1.
  std::vector<float> l;
  float x = -27.7258872f - 2048 * 2e-6f;
  for (int i = 0; i < 4096; ++i, x = std::nextafter(x, 0.0f)) l.push_back(x);
  l.push_back(0.0f);
  Tensor row = Tensor::from_vector(l, {static_cast<int64_t>(l.size())});
  const int32_t cpu = ops::draw_index(row, 0.0f, 0.0f).item<int32_t>();
  EXPECT_GT(cpu, 0);
  EXPECT_LT(cpu, 4096);
  EXPECT_EQ(cpu, ops::draw_index(row.to(kGpu), 0.0f, 0.0f).to(Device::cpu()).item<int32_t>());
}

// The nucleus mask on the GPU keeps exactly the CPU's ids: rows with many ties at the cut (logits on a
// 1/256 grid), -inf holes, -0 beside +0, the weight cutoff 27.7 below the max, every top_p and min-p.
TEST_F(CudaOps, TopPMaskMatchesCpu) {
  std::mt19937 gen(47);
  auto same = [&](const std::vector<float>& l, float top_p, float gap, const std::string& where) {
    const int64_t n = static_cast<int64_t>(l.size());
    const float m = *std::max_element(l.begin(), l.end());
    Tensor row = Tensor::from_vector(l, {n});
    const Tensor mt = Tensor::full({1}, m, Dtype::f32);
    std::vector<float> want = ops::top_p_mask(row, mt, top_p, gap).to_f32_vector();
    std::vector<float> got = ops::top_p_mask(row.to(kGpu), mt.to(kGpu), top_p, gap).to(Device::cpu()).to_f32_vector();
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0 && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0) << where << " top_p " << top_p << " gap " << gap << " first at " << first;
  };
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(4097), int64_t(151936), int64_t(262144)}) {
    for (float spread : {0.3f, 2.0f, 40.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::bernoulli_distribution hole(0.05);
      std::vector<float> l(static_cast<size_t>(n));
      for (float& x : l) x = hole(gen) ? -INFINITY : std::round(dist(gen) * 256.0f) / 256.0f;
      l[static_cast<size_t>(n / 3)] = spread;
      for (float top_p : {1e-6f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}) {
        for (float gap : {-INFINITY, std::log(0.05f)}) same(l, top_p, gap, "n " + std::to_string(n) + " spread " +
                                                                               std::to_string(spread));
      }
    }
  }
  // Narrow continuous rows (a random-weight checkpoint's logits): most ids within a fraction of a logit.
  for (float spread : {0.002f, 0.05f}) {
    std::normal_distribution<float> dist(0.0f, spread);
    std::vector<float> l(151936);
    for (float& x : l) x = dist(gen);
    for (float top_p : {0.5f, 0.9f, 0.999f}) same(l, top_p, -INFINITY, "narrow " + std::to_string(spread));
  }
  // One value everywhere: the cut falls inside the ties, kept in id order.
  for (float top_p : {0.3f, 0.5f, 0.77f}) same(std::vector<float>(151936, 1.5f), top_p, -INFINITY, "all tied");
  // -0 and +0 tie as logits.
  std::vector<float> zeros(5000);
  for (size_t i = 0; i < zeros.size(); ++i) zeros[i] = i % 2 ? -0.0f : 0.0f;
  zeros[100] = 0.5f;
  for (float top_p : {0.2f, 0.6f}) same(zeros, top_p, -INFINITY, "signed zeros");
  // Logits around the point where a weight floors to 0 (27.73 below the max), a dense run of floats.
  std::vector<float> edge;
  for (float x = -27.7258872f - 2048 * 2e-6f; edge.size() < 4096; x = std::nextafter(x, 0.0f)) edge.push_back(x);
  edge.push_back(0.0f);
  for (float top_p : {0.999999f, 1.0f}) same(edge, top_p, -INFINITY, "weight cutoff");
}

TEST_F(CudaOps, Embedding) {
  for (Dtype table_dt : kFloat) {
    Tensor table = randn({1000, 96}, table_dt, 23);
    for (Dtype id_dt : {Dtype::i32, Dtype::i64}) {
      Tensor ids = randint({3, 11}, 1000, id_dt, 24);
      for (Dtype out_dt : kFloat) {
        Tensor c = ops::embedding(table, ids, out_dt);
        EXPECT_EQ(nmse(c, ops::embedding(table.to(kGpu), ids.to(kGpu), out_dt)), 0.0);
      }
    }
  }
  // Ids on the device are not range-checked (that would cost a sync per step): a bad id gathers zeros.
  Tensor table = randn({1000, 8}, Dtype::f32, 25);
  Tensor bad = Tensor::from_vector(std::vector<int32_t>{3, 1000}, {2});
  std::vector<float> got = ops::embedding(table.to(kGpu), bad.to(kGpu), Dtype::f32).to(Device::cpu()).to_f32_vector();
  std::vector<float> want = table.to_f32_vector();
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(got[j], want[3 * 8 + j]);
    EXPECT_EQ(got[8 + j], 0.0f);
  }
}

TEST_F(CudaOps, ScatterRows) {
  for (Dtype dt : kFloat) {
    for (Dtype id_dt : {Dtype::i32, Dtype::i64}) {
      for (int64_t d : {1, 96}) {
        Tensor table = randn({1000, d}, dt, 26);
        Tensor rows = randn({5, d}, dt, 27);
        Tensor ids = ops::cast(Tensor::from_vector(std::vector<int64_t>{999, 0, 500, 17, 1}, {5}), id_dt);
        Tensor g = table.to(kGpu);
        ops::scatter_rows(table, ids, rows);
        ops::scatter_rows(g, ids.to(kGpu), rows.to(kGpu));
        EXPECT_EQ(nmse(table, g), 0.0) << dtype_name(dt) << " " << dtype_name(id_dt) << " d " << d;
      }
    }
  }
  // Ids on the device are not range-checked: an out-of-range one writes nothing.
  Tensor table = randn({10, 1}, Dtype::f32, 28);
  Tensor g = table.to(kGpu);
  ops::scatter_rows(g, Tensor::from_vector(std::vector<int32_t>{10, 2}, {2}).to(kGpu),
                    Tensor::from_vector(std::vector<float>{7.0f, -INFINITY}, {2, 1}).to(kGpu));
  std::vector<float> got = g.to(Device::cpu()).to_f32_vector(), want = table.to_f32_vector();
  want[2] = -INFINITY;
  EXPECT_EQ(got, want);
}

// A layer's key and value writes at per-row device positions in one launch, against the CPU's two writes;
// keys and values of different head dims, the source a strided view as the projections give it.
TEST_F(CudaOps, WritePositionsOfKeysAndValues) {
  const int64_t B = 3, H = 2, N = 9, D = 64, Dv = 32;
  Tensor keys = randn({B, H, N, D}, Dtype::bf16, 70), values = randn({B, H, N, Dv}, Dtype::bf16, 71);
  Tensor k = randn({B, 1, H, D}, Dtype::bf16, 72).transpose(1, 2), v = randn({B, H, 1, Dv}, Dtype::bf16, 73);
  Tensor pos = Tensor::from_vector(std::vector<int32_t>{4, 0, 8}, {B});
  Tensor gk = keys.to(kGpu), gv = values.to(kGpu);
  ops::write_positions(gk, k.to(kGpu).transpose(1, 2).contiguous().transpose(1, 2), gv, v.to(kGpu), pos.to(kGpu));
  ops::write_positions(keys, k, pos);
  ops::write_positions(values, v, pos);
  EXPECT_EQ(keys.to_f32_vector(), gk.to(Device::cpu()).to_f32_vector());
  EXPECT_EQ(values.to_f32_vector(), gv.to(Device::cpu()).to_f32_vector());
}

TEST_F(CudaOps, Matmul) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{17, 33}, {33, 9}, false, false},        {{2, 3, 64, 40}, {40, 24}, false, false},
      {{40, 64}, {3, 40, 24}, true, false},     {{5, 8, 16}, {5, 12, 16}, false, true},
      {{2, 1, 7, 32}, {1, 4, 32, 5}, false, false}, {{1, 128}, {256, 128}, false, true},
  };
  uint32_t seed = 26;
  for (Dtype dt : kFloat) {
    for (const auto& c : cases) {
      Tensor a = randn(c.a, dt, seed++), b = randn(c.b, dt, seed++);
      EXPECT_CLOSE(ops::matmul(a, b, c.ta, c.tb), ops::matmul(a.to(kGpu), b.to(kGpu), c.ta, c.tb), dt)
          << shape_str(c.a) << " x " << shape_str(c.b);
    }
    // Strided views: a transposed operand and a sliced batch.
    Tensor a = randn({24, 3, 40}, dt, seed++), b = randn({3, 40, 16}, dt, seed++);
    Tensor av = a.transpose(0, 1), ag = a.to(kGpu).transpose(0, 1);
    EXPECT_CLOSE(ops::matmul(av, b), ops::matmul(ag, b.to(kGpu)), dt);
    Tensor bt = randn({3, 16, 40}, dt, seed++);
    EXPECT_CLOSE(ops::matmul(av, bt.transpose(1, 2)), ops::matmul(ag, bt.to(kGpu).transpose(1, 2)), dt);
  }
}

TEST_F(CudaOps, Linear) {
  for (Dtype dt : kFloat) {
    Tensor x = randn({2, 9, 64}, dt, 40), w = randn({48, 64}, dt, 41), bias = randn({48}, dt, 42);
    EXPECT_CLOSE(ops::linear(x, w), ops::linear(x.to(kGpu), w.to(kGpu)), dt);
    EXPECT_CLOSE(ops::linear(x, w, bias), ops::linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu)), dt);
  }
  // Decode-sized products (M <= 4 rows) take the GEMV kernel: every M, a row count that is not a
  // multiple of the block's rows, a bias, an f32 result.
  for (int64_t m = 1; m <= 4; ++m) {
    Tensor xs = randn({m, 4096}, Dtype::bf16, 50 + m), ws = randn({1000, 4096}, Dtype::bf16, 60);
    Tensor bs = randn({1000}, Dtype::bf16, 61);
    EXPECT_CLOSE(ops::linear(xs, ws), ops::linear(xs.to(kGpu), ws.to(kGpu)), Dtype::bf16) << "M " << m;
    EXPECT_CLOSE(ops::linear(xs, ws, bs), ops::linear(xs.to(kGpu), ws.to(kGpu), bs.to(kGpu)), Dtype::bf16);
    Tensor xf = randn({m, 4096}, Dtype::f32, 70 + m);
    EXPECT_CLOSE(ops::linear(xf, ws), ops::linear(xf.to(kGpu), ws.to(kGpu)), Dtype::bf16) << "f32 x, M " << m;
  }
  // Every kernel shape (warps per row 1, 2, 4; loads in flight 4, 8), with K off the kernel's load groups.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{5000, 1096},
                      {5000, 4104},
                      {2100, 2056},
                      {2100, 4160},
                      {700, 4104},
                      {700, 8200},
                      {64, 8}})
    for (int64_t m : {1, 3}) {
      Tensor xs = randn({m, k}, Dtype::bf16, 100 + m), ws = randn({n, k}, Dtype::bf16, 110, 0.05f);
      EXPECT_CLOSE(ops::linear(xs, ws), ops::linear(xs.to(kGpu), ws.to(kGpu)), Dtype::bf16) << "N " << n << " K " << k;
    }
  // Products with one or a few outputs (a shared expert's sigmoid gate, a small router) at every row count.
  for (int64_t n : {1, 3, 4})
    for (int64_t m : {1, 7, 37}) {
      Tensor xs = randn({m, 64}, Dtype::bf16, 80 + m), ws = randn({n, 64}, Dtype::bf16, 90 + n);
      EXPECT_CLOSE(ops::linear(xs, ws), ops::linear(xs.to(kGpu), ws.to(kGpu)), Dtype::bf16) << "N " << n << " M " << m;
    }
  // f32 activations with bf16 weights (resident weights): computed in bf16 on the GPU.
  Tensor x = randn({5, 128}, Dtype::f32, 43), w = randn({256, 128}, Dtype::bf16, 44);
  EXPECT_CLOSE(ops::linear(x, w), ops::linear(x.to(kGpu), w.to(kGpu)), Dtype::bf16);
}

// The tensor-core decode products (5 to 32 rows; forced on past the default's 8 when the split is forced):
// every token-tile count (M 5..8, 13, 16, 32; 33 takes cuBLASLt) with rows past M, a row count off the block's 128 (64
// gated), K off the kernel's load groups, each K split over a cluster (1, 2, 4, 8 blocks), bf16 and f32 results, and
// the gated product with each activation.
TEST_F(CudaOps, TensorCoreDecodeProducts) {
  struct Case {
    int64_t n, k;
  };
  for (const Case& c : {Case{1000, 4096}, Case{300, 32 * 37}, Case{2100, 96}}) {
    Tensor w = randn({c.n, c.k}, Dtype::bf16, 300, 0.05f), wg = w.to(kGpu);
    Tensor gw = randn({2 * c.n, c.k}, Dtype::bf16, 301, 0.05f), gwg = gw.to(kGpu);
    for (int64_t m : {5, 7, 8, 13, 16, 32, 33}) {
      Tensor x = randn({m, c.k}, Dtype::bf16, 310 + static_cast<uint32_t>(m)), xg = x.to(kGpu);
      Tensor want = ops::linear(x, w), want32 = ops::linear(x, w, Tensor(), Dtype::f32);
      Tensor y = ops::linear(x, gw);
      Tensor gate = y.narrow(-1, 0, c.n), up = y.narrow(-1, c.n, c.n);
      for (const char* splits : {"", "1", "2", "4", "8"}) {
        ScopedEnv splits_env("TERN_CUDA_MMA_SPLITS", splits);
        ScopedEnv gemv_env("TERN_CUDA_MMA_GEMV", *splits ? "1" : nullptr);  // whatever the weights' size
        const std::string what = "N " + std::to_string(c.n) + " K " + std::to_string(c.k) + " M " + std::to_string(m) +
                                 " splits " + (*splits ? splits : "auto");
        EXPECT_CLOSE(want, ops::linear(xg, wg), Dtype::bf16) << what;
        EXPECT_CLOSE(want32, ops::linear(xg, wg, Tensor(), Dtype::f32), Dtype::bf16) << what;
        for (ops::UnaryOp act : {ops::UnaryOp::silu, ops::UnaryOp::gelu_tanh, ops::UnaryOp::gelu_erf}) {
          Tensor ref =
              act == ops::UnaryOp::silu ? ops::swiglu(gate, up) : ops::geglu(gate, up, act == ops::UnaryOp::gelu_tanh);
          EXPECT_CLOSE(ref, ops::gated_linear(xg, gwg, act), Dtype::bf16) << what << " act " << static_cast<int>(act);
        }
      }
    }
  }
}

TEST_F(CudaOps, NoCudaMallocInSteadyState) {
  Tensor x = randn({8, 512}, Dtype::bf16, 400).to(kGpu), w = randn({1024, 512}, Dtype::bf16, 401).to(kGpu);
  auto step = [&] {
    Tensor h = ops::linear(ops::rms_norm(x, Tensor(), 1e-6f), w);
    return ops::argmax(ops::softmax(h, -1), -1).to(Device::cpu());
  };
  step();
  step();
  const size_t before = cuda::allocator_stats().cuda_mallocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(cuda::allocator_stats().cuda_mallocs, before);
}

}  // namespace
}  // namespace tern
