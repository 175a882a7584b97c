// GemmaMoe: the scaled router (scale-free RMSNorm x scale x hidden^-1/2, softmax, top-k, renormalise,
// x per_expert_scale) and the GeGLU expert mix, against a plain per-token loop in double.
#include "tern/layers/gemma_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "tern/io/weights.h"
#include "tern/ops/elementwise.h"

namespace tern {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(GemmaMoe, MatchesPerTokenLoop) {
  const int64_t H = 12, E = 5, K = 2, I = 4, B = 2, L = 6, T = B * L;
  const float eps = 1e-6f;
  const std::string dir = ::testing::TempDir() + "/tern_gemma_moe";
  std::filesystem::create_directories(dir);
  std::vector<float> proj = random_values(E * H, 1, 1.0f), scale = random_values(H, 2, 0.3f, 1.0f);
  std::vector<float> pes = random_values(E, 3, 0.3f, 1.0f);
  std::vector<float> gate_up = random_values(E * 2 * I * H, 4, 0.3f), down = random_values(E * H * I, 5, 0.3f);
  io::save_safetensors(dir + "/model.safetensors",
                       {{"layer.router.proj.weight", Tensor::from_vector(proj, {E, H})},
                        {"layer.router.scale", Tensor::from_vector(scale, {H})},
                        {"layer.router.per_expert_scale", Tensor::from_vector(pes, {E})},
                        {"layer.experts.gate_up_proj", Tensor::from_vector(gate_up, {E, 2 * I, H})},
                        {"layer.experts.down_proj", Tensor::from_vector(down, {E, H, I})}});
  io::WeightStore store = io::WeightStore::open(dir);
  WeightLoader w(store, "layer.", Device::cpu(), Dtype::f32);
  GemmaMoe moe = GemmaMoe::load(w, GemmaMoeShape{.hidden = H, .n_expert = E, .n_expert_used = K, .expert_inter = I,
                                                 .norm_eps = eps});

  std::vector<float> r = random_values(T * H, 6, 2.0f), x = random_values(T * H, 7, 1.0f);
  Tensor got = moe.forward(Tensor::from_vector(r, {B, L, H}), Tensor::from_vector(x, {B, L, H})).contiguous();
  ASSERT_EQ(got.shape(), (Shape{B, L, H}));

  float max_diff = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* rt = r.data() + t * H;
    const float* xt = x.data() + t * H;
    double ms = 0;
    for (int64_t c = 0; c < H; ++c) ms += static_cast<double>(rt[c]) * rt[c];
    const double inv = 1.0 / std::sqrt(ms / H + eps);
    std::vector<double> p(E);
    for (int64_t e = 0; e < E; ++e) {
      double acc = 0;
      for (int64_t c = 0; c < H; ++c) acc += proj[e * H + c] * rt[c] * inv * scale[c] / std::sqrt(double(H));
      p[e] = acc;
    }
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (double& v : p) v /= sum;
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    const double kept = p[order[0]] + p[order[1]];
    for (int64_t c = 0; c < H; ++c) {
      double want = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int e = order[j];
        const double weight = p[e] / kept * pes[e];
        double y = 0;
        for (int64_t i = 0; i < I; ++i) {
          double g = 0, u = 0;
          for (int64_t k = 0; k < H; ++k) {
            g += gate_up[(e * 2 * I + i) * H + k] * xt[k];
            u += gate_up[(e * 2 * I + I + i) * H + k] * xt[k];
          }
          y += down[(e * H + c) * I + i] * gelu_tanh(g) * u;
        }
        want += weight * y;
      }
      max_diff = std::max(max_diff, static_cast<float>(std::fabs(got.data<float>()[t * H + c] - want)));
    }
  }
  EXPECT_LE(max_diff, 1e-5f);
}

// bf16 activations (a bf16 model) still route in f32: the same choice and weights as the f32 model on the
// same (bf16-exact) values, where bf16 router logits would move the weights by ~1e-3 and flip near ties.
TEST(GemmaMoe, Bf16ActivationsRouteInF32) {
  const int64_t H = 64, E = 8, K = 2, I = 4, T = 40;
  const std::string dir = ::testing::TempDir() + "/tern_gemma_moe_bf16";
  std::filesystem::create_directories(dir);
  auto bf16_tensor = [](const std::vector<float>& v, const Shape& shape) {
    return ops::cast(Tensor::from_vector(v, shape), Dtype::bf16);
  };
  io::save_safetensors(dir + "/model.safetensors",
                       {{"router.proj.weight", bf16_tensor(random_values(E * H, 11, 1.0f), {E, H})},
                        {"router.scale", bf16_tensor(random_values(H, 12, 0.3f, 1.0f), {H})},
                        {"router.per_expert_scale", bf16_tensor(random_values(E, 13, 0.3f, 1.0f), {E})},
                        {"experts.gate_up_proj", bf16_tensor(random_values(E * 2 * I * H, 14, 0.3f), {E, 2 * I, H})},
                        {"experts.down_proj", bf16_tensor(random_values(E * H * I, 15, 0.3f), {E, H, I})}});
  io::WeightStore store = io::WeightStore::open(dir);
  const GemmaMoeShape shape{.hidden = H, .n_expert = E, .n_expert_used = K, .expert_inter = I};
  GemmaMoe f32 = GemmaMoe::load(WeightLoader(store, "", Device::cpu(), Dtype::f32), shape);
  GemmaMoe b16 = GemmaMoe::load(WeightLoader(store, "", Device::cpu(), Dtype::bf16), shape);
  Tensor r = bf16_tensor(random_values(T * H, 16, 2.0f), {T, H});
  RouterChoice want = f32.route(ops::cast(r, Dtype::f32)), got = b16.route(r);
  ASSERT_EQ(got.weights.dtype(), Dtype::f32);
  const std::vector<float> ww = want.weights.to_f32_vector(), gw = got.weights.to_f32_vector();
  const std::vector<float> we = want.experts.to_f32_vector(), ge = got.experts.to_f32_vector();
  ASSERT_EQ(ww.size(), gw.size());
  for (size_t i = 0; i < ww.size(); ++i) {
    EXPECT_EQ(we[i], ge[i]) << i;
    EXPECT_NEAR(ww[i], gw[i], 1e-5f) << i;
  }
}

TEST(GemmaMoe, MismatchedInputsAreAClearError) {
  const std::string dir = ::testing::TempDir() + "/tern_gemma_moe_bad";
  std::filesystem::create_directories(dir);
  io::save_safetensors(dir + "/model.safetensors",
                       {{"router.proj.weight", Tensor::zeros({2, 4}, Dtype::f32)},
                        {"router.scale", Tensor::zeros({4}, Dtype::f32)},
                        {"router.per_expert_scale", Tensor::zeros({2}, Dtype::f32)},
                        {"experts.gate_up_proj", Tensor::zeros({2, 6, 4}, Dtype::f32)},
                        {"experts.down_proj", Tensor::zeros({2, 4, 3}, Dtype::f32)}});
  io::WeightStore store = io::WeightStore::open(dir);
  WeightLoader w(store, "", Device::cpu(), Dtype::f32);
  GemmaMoe moe = GemmaMoe::load(w, GemmaMoeShape{.hidden = 4, .n_expert = 2, .n_expert_used = 1, .expert_inter = 3});
  EXPECT_THROW(moe.forward(Tensor::zeros({3, 4}, Dtype::f32), Tensor::zeros({2, 4}, Dtype::f32)), Error);
  EXPECT_THROW(GemmaMoe::load(w, GemmaMoeShape{.hidden = 4, .n_expert = 2, .n_expert_used = 3, .expert_inter = 3}),
               Error);
}

}  // namespace
}  // namespace tern
