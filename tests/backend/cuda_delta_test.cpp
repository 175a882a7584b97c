// Gated DeltaNet ops on CUDA against the CPU: l2norm, causal_conv1d with history carried across calls,
// and the gated delta rule (recurrent and chunked) with the state updated in place; the recurrent
// cache's state on the GPU. NMSE <= 1e-7 (f32), <= 1e-4 (bf16). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tern/ops/delta.h"
#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/state/cache_file.h"
#include "tern/state/recurrent_cache.h"

namespace tern {
namespace {

const Device kGpu = Device::cuda(0);

class CudaDelta : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_status();
    cuda_init();
  }
};

Tensor randn(const Shape& shape, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

Tensor uniform(const Shape& shape, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

// NMSE of got (any device) against the CPU reference; 1e30 on a shape mismatch or a NaN.
double nmse(const Tensor& ref, const Tensor& got) {
  EXPECT_EQ(shape_str(ref.shape()), shape_str(got.shape()));
  std::vector<float> r = ref.to_f32_vector(), g = cpu(got).to_f32_vector();
  if (r.size() != g.size()) return 1e30;
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i]) || std::isnan(g[i])) return 1e30;
    num += (double(r[i]) - g[i]) * (double(r[i]) - g[i]);
    den += double(r[i]) * r[i];
  }
  return den > 0 ? num / den : num;
}

TEST_F(CudaDelta, L2NormMatchesCpu) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    for (const Shape& s : {Shape{3, 5, 16}, Shape{7, 128}, Shape{2, 4, 3000}, Shape{1, 1}}) {
      Tensor x = randn(s, 11, 2.0f);
      if (dt != Dtype::f32) x = ops::cast(x, dt);
      Tensor want = ops::l2norm(x, 1e-6f), got = ops::l2norm(x.to(kGpu), 1e-6f);
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_LE(nmse(want, got), dt == Dtype::f32 ? 1e-7 : 1e-4) << shape_str(s) << " " << dtype_name(dt);
    }
  }
  // A strided view (a slice of the last dim) is normalised over its own elements.
  Tensor x = randn({4, 6, 40}, 12);
  Tensor view = x.slice(2, 8, 24);
  EXPECT_LE(nmse(ops::l2norm(view, 1e-6f), ops::l2norm(x.to(kGpu).slice(2, 8, 24), 1e-6f)), 1e-7);
}

TEST_F(CudaDelta, CausalConv1dCarriesHistoryAcrossCalls) {
  struct Case { int64_t B, L1, L2, C, K; };
  // L2 < K-1 takes the history update's in-place branch (part of the old history survives).
  for (const Case c : {Case{1, 5, 1, 8, 4}, Case{2, 9, 2, 40, 4}, Case{3, 1, 1, 33, 4}, Case{2, 70, 65, 300, 4},
                       Case{2, 6, 3, 17, 1}, Case{1, 3, 4, 12, 6}}) {
    const std::string what = "B " + std::to_string(c.B) + " L " + std::to_string(c.L1) + "+" + std::to_string(c.L2) +
                             " C " + std::to_string(c.C) + " K " + std::to_string(c.K);
    Tensor w = randn({c.C, c.K}, 21);
    Tensor x1 = randn({c.B, c.L1, c.C}, 22), x2 = randn({c.B, c.L2, c.C}, 23);
    Tensor h_cpu = randn({c.B, c.K - 1, c.C}, 24);  // a sequence already under way
    Tensor h_gpu = h_cpu.to(kGpu);
    Tensor wg = w.to(kGpu);
    Tensor want1 = ops::causal_conv1d(x1, w, h_cpu), got1 = ops::causal_conv1d(x1.to(kGpu), wg, h_gpu);
    EXPECT_LE(nmse(want1, got1), 1e-7) << what << " first call";
    EXPECT_LE(nmse(h_cpu, h_gpu), 1e-7) << what << " history after the first call";
    Tensor want2 = ops::causal_conv1d(x2, w, h_cpu), got2 = ops::causal_conv1d(x2.to(kGpu), wg, h_gpu);
    EXPECT_LE(nmse(want2, got2), 1e-7) << what << " second call";
    EXPECT_LE(nmse(h_cpu, h_gpu), 1e-7) << what << " history after the second call";
  }
  // A strided x (a time slice of a longer buffer) is read as its logical values.
  Tensor w = randn({24, 4}, 31), big = randn({2, 20, 24}, 32), h = Tensor::zeros({2, 3, 24}, Dtype::f32);
  Tensor hg = h.to(kGpu);
  EXPECT_LE(nmse(ops::causal_conv1d(big.slice(1, 2, 20, 2), w, h),
                 ops::causal_conv1d(big.to(kGpu).slice(1, 2, 20, 2), w.to(kGpu), hg)),
            1e-7);
  EXPECT_LE(nmse(h, hg), 1e-7);
}

struct DeltaInputs {
  Tensor q, k, v, g, beta, state;
};

// Inputs as the model feeds them: unit-norm keys, queries scaled by 1/sqrt(Dk), g <= 0, beta in (0, 1),
// and a non-zero initial state.
DeltaInputs delta_inputs(int64_t B, int64_t L, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, uint32_t seed) {
  DeltaInputs in;
  in.q = ops::scale(ops::l2norm(randn({B, L, Hk, Dk}, seed), 1e-6f), 1.0f / std::sqrt(static_cast<float>(Dk)));
  in.k = ops::l2norm(randn({B, L, Hk, Dk}, seed + 1), 1e-6f);
  in.v = randn({B, L, Hv, Dv}, seed + 2);
  in.g = uniform({B, L, Hv}, seed + 3, -0.6f, -0.005f);
  in.beta = uniform({B, L, Hv}, seed + 4, 0.05f, 0.95f);
  in.state = randn({B, Hv, Dk, Dv}, seed + 5, 0.5f);
  return in;
}

TEST_F(CudaDelta, GatedDeltaRuleMatchesCpu) {
  struct Heads { int64_t B, Hk, Hv, Dk, Dv; };
  const Heads heads[] = {{1, 2, 2, 16, 16}, {2, 2, 4, 32, 48}, {1, 1, 2, 128, 128}, {1, 2, 2, 256, 40}};
  int seed = 100;
  for (const Heads& h : heads) {
    for (int64_t L : {1, 63, 64, 65, 1000}) {
      if (L == 1000 && h.Dk > 128) continue;  // the CPU reference is slow at Dk 256; L 65 covers it
      for (auto algo : {ops::DeltaRuleAlgo::recurrent, ops::DeltaRuleAlgo::chunked}) {
        const std::string what = std::string(algo == ops::DeltaRuleAlgo::recurrent ? "recurrent" : "chunked") +
                                 " B " + std::to_string(h.B) + " L " + std::to_string(L) + " Hk " +
                                 std::to_string(h.Hk) + " Hv " + std::to_string(h.Hv) + " Dk " +
                                 std::to_string(h.Dk) + " Dv " + std::to_string(h.Dv);
        DeltaInputs in = delta_inputs(h.B, L, h.Hk, h.Hv, h.Dk, h.Dv, static_cast<uint32_t>(seed++));
        Tensor s_cpu = in.state.clone(), s_gpu = in.state.to(kGpu);
        Tensor want = ops::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s_cpu, algo);
        Tensor got = ops::gated_delta_rule(in.q.to(kGpu), in.k.to(kGpu), in.v.to(kGpu), in.g.to(kGpu),
                                           in.beta.to(kGpu), s_gpu, algo);
        EXPECT_TRUE(got.device().is_cuda()) << what;
        EXPECT_LE(nmse(want, got), 1e-7) << what << " output";
        EXPECT_LE(nmse(s_cpu, s_gpu), 1e-7) << what << " final state";
        // The state really moved (a kernel that skipped the write-back would keep the initial one).
        EXPECT_GT(nmse(in.state, s_gpu), 1e-6) << what << " final state equals the initial one";
      }
    }
  }
}

TEST_F(CudaDelta, GatedDeltaRuleChunkSizes) {
  // Chunks of 1, 16 and 100 (above the kernel's 64: run as 64) give the CPU's result for the same chunk.
  DeltaInputs in = delta_inputs(1, 150, 2, 4, 64, 64, 300);
  for (int64_t chunk : {1, 16, 100}) {
    Tensor s_cpu = in.state.clone(), s_gpu = in.state.to(kGpu);
    Tensor want = ops::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s_cpu, ops::DeltaRuleAlgo::chunked, chunk);
    Tensor got = ops::gated_delta_rule(in.q.to(kGpu), in.k.to(kGpu), in.v.to(kGpu), in.g.to(kGpu), in.beta.to(kGpu),
                                       s_gpu, ops::DeltaRuleAlgo::chunked, chunk);
    EXPECT_LE(nmse(want, got), 1e-7) << "chunk " << chunk;
    EXPECT_LE(nmse(s_cpu, s_gpu), 1e-7) << "chunk " << chunk;
  }
}

TEST_F(CudaDelta, GatedDeltaRuleStepsContinueAPrefill) {
  // A prefill of 70 tokens then 5 one-token steps on the GPU equals one 75-token CPU pass.
  const int64_t B = 2, Hk = 2, Hv = 4, Dk = 32, Dv = 32, L = 75, P = 70;
  DeltaInputs in = delta_inputs(B, L, Hk, Hv, Dk, Dv, 7);
  Tensor s_cpu = in.state.clone(), s_gpu = in.state.to(kGpu);
  Tensor want = ops::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s_cpu, ops::DeltaRuleAlgo::recurrent);
  std::vector<Tensor> parts;
  std::vector<std::pair<int64_t, int64_t>> spans = {{0, P}};
  for (int64_t t = P; t < L; ++t) spans.push_back({t, t + 1});
  for (const auto& [t0, t1] : spans) {
    auto part = [&](const Tensor& t) { return t.slice(1, t0, t1).to(kGpu); };
    const auto algo = t1 - t0 == 1 ? ops::DeltaRuleAlgo::recurrent : ops::DeltaRuleAlgo::chunked;
    parts.push_back(cpu(ops::gated_delta_rule(part(in.q), part(in.k), part(in.v), part(in.g), part(in.beta), s_gpu,
                                              algo)));
  }
  ASSERT_EQ(parts.size(), 6u);
  EXPECT_LE(nmse(want, ops::concat(parts, 1)), 1e-7);
  EXPECT_LE(nmse(s_cpu, s_gpu), 1e-7);
}

TEST_F(CudaDelta, RecurrentCacheLivesOnTheRequestedDevice) {
  const RecurrentShape shape{.conv_dim = 6, .conv_kernel = 4, .n_v_head = 2, .d_k = 3, .d_v = 3};
  RecurrentCache c(shape);
  Tensor& state = c.recurrent_state(1, kGpu);
  EXPECT_TRUE(state.device().is_cuda());
  EXPECT_TRUE(c.conv_state(1, kGpu).device().is_cuda());
  Tensor filled = randn({1, 2, 3, 3}, 41);
  state.copy_from(filled.to(kGpu));
  c.advance(3);
  RecurrentCache::Snapshot snap = c.snapshot();
  EXPECT_TRUE(snap.state.device().is_cuda());
  // Saved to a file and loaded (onto the CPU), the state moves to the GPU on the next use.
  CacheWriter w;
  c.save(w);
  std::vector<CacheEntry> entries = w.entries();  // laid out as a file's payload
  std::vector<uint8_t> payload;
  for (CacheEntry& e : entries) {
    e.offset = payload.size();
    e.size = e.data.size();
    payload.insert(payload.end(), e.data.begin(), e.data.end());
  }
  RecurrentCache d(shape);
  CacheReader r("recurrent", entries, payload.data());
  d.load(r);
  EXPECT_EQ(d.offset(), 3);
  Tensor& back = d.recurrent_state(1, kGpu);
  EXPECT_TRUE(back.device().is_cuda());
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(nmse(filled, back), 0.0);
}

}  // namespace
}  // namespace tern
