// SparseMoe: the router (softmax -> top-k -> renormalise) and the gathered expert forward, both
// against plain per-token loops, for the per-expert and the fused expert layouts.
#include "tern/layers/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "tern/io/weights.h"

namespace tern {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct NaiveRoute {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// One row: softmax in double, experts by descending probability (lower index first on ties), first k.
NaiveRoute naive_route(const float* logits, int64_t E, int64_t k, bool renormalize) {
  double mx = *std::max_element(logits, logits + E), sum = 0;
  std::vector<double> p(E);
  for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(static_cast<double>(logits[e]) - mx));
  for (auto& x : p) x /= sum;
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  NaiveRoute r;
  double kept = 0;
  for (int64_t j = 0; j < k; ++j) kept += p[order[j]];
  for (int64_t j = 0; j < k; ++j) {
    r.experts.push_back(order[j]);
    r.weights.push_back(static_cast<float>(renormalize ? p[order[j]] / kept : p[order[j]]));
  }
  return r;
}

TEST(MoeRouter, MatchesNaiveLoop) {
  const int64_t T = 17, E = 8;
  std::vector<float> logits = random_values(T * E, 7, 2.0f);
  Tensor lt = Tensor::from_vector(logits, {T, E});
  for (int64_t k : {1, 2, 3, 8}) {
    for (bool renorm : {false, true}) {
      RouterChoice got = route_top_k(lt, k, renorm);
      ASSERT_EQ(got.weights.shape(), (Shape{T, k}));
      ASSERT_EQ(got.experts.shape(), (Shape{T, k}));
      ASSERT_EQ(got.weights.dtype(), Dtype::f32);
      ASSERT_EQ(got.experts.dtype(), Dtype::i32);
      for (int64_t t = 0; t < T; ++t) {
        NaiveRoute want = naive_route(logits.data() + t * E, E, k, renorm);
        float wsum = 0;
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(got.experts.data<int32_t>()[t * k + j], want.experts[j]) << "k " << k << " row " << t;
          EXPECT_NEAR(got.weights.data<float>()[t * k + j], want.weights[j], 1e-6f) << "k " << k << " row " << t;
          wsum += got.weights.data<float>()[t * k + j];
        }
        if (renorm) EXPECT_NEAR(wsum, 1.0f, 1e-6f);
      }
    }
  }
}

TEST(MoeRouter, BadInputIsAClearError) {
  Tensor lt = Tensor::zeros({3, 4}, Dtype::f32);
  EXPECT_THROW(route_top_k(lt, 0, true), Error);
  EXPECT_THROW(route_top_k(lt, 5, true), Error);
  EXPECT_THROW(route_top_k(Tensor::zeros({4}, Dtype::f32), 1, true), Error);
}

// x [T, in] row-major, w [out, in] -> [T, out]
std::vector<float> naive_linear(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t in,
                                int64_t out) {
  std::vector<float> y(T * out, 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(x[t * in + i]) * w[o * in + i];
      y[t * out + o] = static_cast<float>(acc);
    }
  return y;
}

class SparseMoeForward : public ::testing::TestWithParam<bool> {};  // param: fused expert layout

TEST_P(SparseMoeForward, MatchesPerTokenLoop) {
  const bool fused = GetParam();
  const int64_t H = 12, E = 6, K = 2, I = 5, B = 2, L = 7, T = B * L;
  const std::string dir = ::testing::TempDir() + (fused ? "/tern_moe_fused" : "/tern_moe_split");
  std::filesystem::create_directories(dir);

  std::vector<float> router = random_values(E * H, 1, 0.5f);
  std::vector<std::vector<float>> gate(E), up(E), down(E);
  for (int64_t e = 0; e < E; ++e) {
    gate[e] = random_values(I * H, 10 + e, 0.3f);
    up[e] = random_values(I * H, 20 + e, 0.3f);
    down[e] = random_values(H * I, 30 + e, 0.3f);
  }
  std::vector<std::pair<std::string, Tensor>> tensors = {{"mlp.gate.weight", Tensor::from_vector(router, {E, H})}};
  if (fused) {
    std::vector<float> gate_up, down_all;
    for (int64_t e = 0; e < E; ++e) {
      gate_up.insert(gate_up.end(), gate[e].begin(), gate[e].end());
      gate_up.insert(gate_up.end(), up[e].begin(), up[e].end());
      down_all.insert(down_all.end(), down[e].begin(), down[e].end());
    }
    tensors.emplace_back("mlp.experts.gate_up_proj", Tensor::from_vector(gate_up, {E, 2 * I, H}));
    tensors.emplace_back("mlp.experts.down_proj", Tensor::from_vector(down_all, {E, H, I}));
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = "mlp.experts." + std::to_string(e) + ".";
      tensors.emplace_back(p + "gate_proj.weight", Tensor::from_vector(gate[e], {I, H}));
      tensors.emplace_back(p + "up_proj.weight", Tensor::from_vector(up[e], {I, H}));
      tensors.emplace_back(p + "down_proj.weight", Tensor::from_vector(down[e], {H, I}));
    }
  }
  io::save_safetensors(dir + "/model.safetensors", tensors);
  io::WeightStore store = io::WeightStore::open(dir);
  WeightLoader w(store, "mlp.", Device::cpu(), Dtype::f32);
  SparseMoe moe = SparseMoe::load(w, SparseMoeShape{.hidden = H, .n_expert = E, .n_expert_used = K,
                                                    .expert_inter = I, .norm_topk_prob = true});

  std::vector<float> x = random_values(T * H, 99, 1.0f);
  Tensor got = moe.forward(Tensor::from_vector(x, {B, L, H})).contiguous();
  ASSERT_EQ(got.shape(), (Shape{B, L, H}));

  std::vector<float> logits = naive_linear(x, router, T, H, E);
  float max_diff = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> xt(x.begin() + t * H, x.begin() + (t + 1) * H);
    NaiveRoute r = naive_route(logits.data() + t * E, E, K, true);
    std::vector<double> want(H, 0.0);
    for (int64_t j = 0; j < K; ++j) {
      const int32_t e = r.experts[j];
      std::vector<float> g = naive_linear(xt, gate[e], 1, H, I), u = naive_linear(xt, up[e], 1, H, I);
      std::vector<float> h(I);
      for (int64_t i = 0; i < I; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      std::vector<float> y = naive_linear(h, down[e], 1, I, H);
      for (int64_t c = 0; c < H; ++c) want[c] += r.weights[j] * y[c];
    }
    for (int64_t c = 0; c < H; ++c)
      max_diff = std::max(max_diff, std::fabs(got.data<float>()[t * H + c] - static_cast<float>(want[c])));
  }
  EXPECT_LE(max_diff, 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SparseMoeForward, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "fused" : "per_expert"; });

TEST(SparseMoe, MissingExpertIsAClearError) {
  const std::string dir = ::testing::TempDir() + "/tern_moe_missing";
  std::filesystem::create_directories(dir);
  io::save_safetensors(dir + "/model.safetensors", {{"mlp.gate.weight", Tensor::zeros({4, 8}, Dtype::f32)}});
  io::WeightStore store = io::WeightStore::open(dir);
  WeightLoader w(store, "mlp.", Device::cpu(), Dtype::f32);
  EXPECT_THROW(SparseMoe::load(w, SparseMoeShape{.hidden = 8, .n_expert = 4, .n_expert_used = 2, .expert_inter = 3}),
               Error);
}

}  // namespace
}  // namespace tern
