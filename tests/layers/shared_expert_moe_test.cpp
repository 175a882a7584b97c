// SharedExpertMoe against a per-token loop: softmax top-k routing renormalised, the routed SwiGLU
// experts mixed by their weights, plus sigmoid(shared_expert_gate . x) times the shared SwiGLU expert.
#include "tern/layers/shared_expert_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "tern/io/safetensors.h"
#include "tern/io/weights.h"

namespace tern {
namespace {

std::vector<float> normal_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// w [out, in] times x [in], in double.
std::vector<double> matvec(const std::vector<float>& w, const std::vector<double>& x, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[o] += double(w[o * in + i]) * x[i];
  return y;
}

std::vector<double> swiglu_mlp(const std::vector<float>& gate, const std::vector<float>& up,
                               const std::vector<float>& down, const std::vector<double>& x, int64_t inter) {
  std::vector<double> g = matvec(gate, x, inter), u = matvec(up, x, inter), h(inter);
  for (int64_t i = 0; i < inter; ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return matvec(down, h, static_cast<int64_t>(x.size()));
}

TEST(SharedExpertMoe, MatchesPerTokenLoop) {
  const int64_t H = 10, E = 5, K = 2, I = 4, S = 6, T = 9;
  const std::string dir = ::testing::TempDir() + "/tern_shared_expert_moe";
  std::filesystem::create_directories(dir);
  std::vector<float> router = normal_values(E * H, 1, 0.6f), sgate = normal_values(H, 2, 0.5f);
  std::vector<float> sg = normal_values(S * H, 3, 0.3f), su = normal_values(S * H, 4, 0.3f),
                     sd = normal_values(H * S, 5, 0.3f);
  std::vector<std::vector<float>> eg(E), eu(E), ed(E);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"mlp.gate.weight", Tensor::from_vector(router, {E, H})},
      {"mlp.shared_expert_gate.weight", Tensor::from_vector(sgate, {1, H})},
      {"mlp.shared_expert.gate_proj.weight", Tensor::from_vector(sg, {S, H})},
      {"mlp.shared_expert.up_proj.weight", Tensor::from_vector(su, {S, H})},
      {"mlp.shared_expert.down_proj.weight", Tensor::from_vector(sd, {H, S})}};
  for (int64_t e = 0; e < E; ++e) {
    eg[e] = normal_values(I * H, 10 + e, 0.3f);
    eu[e] = normal_values(I * H, 20 + e, 0.3f);
    ed[e] = normal_values(H * I, 30 + e, 0.3f);
    const std::string p = "mlp.experts." + std::to_string(e) + ".";
    tensors.emplace_back(p + "gate_proj.weight", Tensor::from_vector(eg[e], {I, H}));
    tensors.emplace_back(p + "up_proj.weight", Tensor::from_vector(eu[e], {I, H}));
    tensors.emplace_back(p + "down_proj.weight", Tensor::from_vector(ed[e], {H, I}));
  }
  io::save_safetensors(dir + "/model.safetensors", tensors);
  io::WeightStore store = io::WeightStore::open(dir);
  SharedExpertMoe moe = SharedExpertMoe::load(
      WeightLoader(store, "mlp.", Device::cpu(), Dtype::f32),
      SparseMoeShape{.hidden = H, .n_expert = E, .n_expert_used = K, .expert_inter = I, .norm_topk_prob = true}, S);

  std::vector<float> x = normal_values(T * H, 99, 1.0f);
  Tensor got = moe.forward(Tensor::from_vector(x, {1, T, H})).contiguous();
  ASSERT_EQ(got.shape(), (Shape{1, T, H}));
  float worst = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xt(x.begin() + t * H, x.begin() + (t + 1) * H);
    std::vector<double> logits = matvec(router, xt, E), p(E);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[e] - mx));
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    const double top = p[order[0]] + p[order[1]];
    std::vector<double> want(H, 0.0);
    for (int64_t j = 0; j < K; ++j) {
      const int e = order[j];
      std::vector<double> y = swiglu_mlp(eg[e], eu[e], ed[e], xt, I);
      for (int64_t c = 0; c < H; ++c) want[c] += p[e] / top * y[c];
    }
    const double gate = 1.0 / (1.0 + std::exp(-matvec(sgate, xt, 1)[0]));
    std::vector<double> shared = swiglu_mlp(sg, su, sd, xt, S);
    for (int64_t c = 0; c < H; ++c) {
      want[c] += gate * shared[c];
      worst = std::max(worst, static_cast<float>(std::fabs(got.data<float>()[t * H + c] - want[c])));
    }
  }
  EXPECT_LE(worst, 1e-5f);
}

}  // namespace
}  // namespace tern
