// GatedDeltaNet: the chunked (prefill) and recurrent (decode) forms of the gated delta rule agree on
// random inputs across chunk boundaries, and the layer gives the same outputs and cache state whether a
// sequence arrives in one prefill or as a prefill followed by one-token steps.
#include "tern/layers/gated_delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "tern/io/safetensors.h"
#include "tern/io/weights.h"
#include "tern/ops/delta.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"

namespace tern {
namespace {

Tensor random_tensor(const Shape& shape, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// max |a - b| / (1 + |b|)
float rel_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.contiguous().to_f32_vector(), y = b.contiguous().to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  float m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]) / (1.0f + std::fabs(y[i])));
  return m;
}

class ChunkedVsRecurrent : public ::testing::TestWithParam<int64_t> {};

TEST_P(ChunkedVsRecurrent, SameOutputsAndState) {
  const int64_t B = 2, L = GetParam(), Hk = 2, Hv = 4, Dk = 16, Dv = 16;
  const uint32_t s = static_cast<uint32_t>(L);
  Tensor q = ops::scale(ops::l2norm(random_tensor({B, L, Hk, Dk}, s, -1, 1), 1e-6f), 0.25f);
  Tensor k = ops::l2norm(random_tensor({B, L, Hk, Dk}, s + 1, -1, 1), 1e-6f);
  Tensor v = random_tensor({B, L, Hv, Dv}, s + 2, -2, 2);
  // g = -exp(A_log) * softplus(a + dt_bias) spans slow and fast decay.
  Tensor g = ops::scale(ops::unary(random_tensor({B, L, Hv}, s + 3, -4, 2), ops::UnaryOp::softplus), -1.0f);
  Tensor beta = ops::sigmoid(random_tensor({B, L, Hv}, s + 4, -3, 3));
  Tensor init = random_tensor({B, Hv, Dk, Dv}, s + 5, -0.5f, 0.5f);
  Tensor st_c = init.clone(), st_r = init.clone();
  Tensor oc = ops::gated_delta_rule(q, k, v, g, beta, st_c, ops::DeltaRuleAlgo::chunked, 64);
  Tensor orr = ops::gated_delta_rule(q, k, v, g, beta, st_r, ops::DeltaRuleAlgo::recurrent);
  EXPECT_LE(rel_diff(oc, orr), 1e-4f) << "L " << L;
  EXPECT_LE(rel_diff(st_c, st_r), 1e-4f) << "L " << L;
}

INSTANTIATE_TEST_SUITE_P(Lengths, ChunkedVsRecurrent, ::testing::Values(1, 63, 64, 65, 1000));

TEST(GatedDeltaNet, PrefillEqualsPrefillThenSteps) {
  const GatedDeltaNetShape sh{.hidden = 24, .n_k_head = 2, .n_v_head = 4, .d_k = 8, .d_v = 6, .conv_kernel = 4,
                              .norm_eps = 1e-6f};
  const int64_t key_dim = 16, value_dim = 24, conv_dim = 2 * key_dim + value_dim;
  const std::string dir = ::testing::TempDir() + "/tern_gdn_layer";
  std::filesystem::create_directories(dir);
  io::save_safetensors(dir + "/model.safetensors",
                       {{"la.in_proj_qkv.weight", random_tensor({conv_dim, sh.hidden}, 1, -0.3f, 0.3f)},
                        {"la.in_proj_z.weight", random_tensor({value_dim, sh.hidden}, 2, -0.3f, 0.3f)},
                        {"la.in_proj_b.weight", random_tensor({sh.n_v_head, sh.hidden}, 3, -0.3f, 0.3f)},
                        {"la.in_proj_a.weight", random_tensor({sh.n_v_head, sh.hidden}, 4, -0.3f, 0.3f)},
                        {"la.out_proj.weight", random_tensor({sh.hidden, value_dim}, 5, -0.3f, 0.3f)},
                        {"la.conv1d.weight", random_tensor({conv_dim, 1, sh.conv_kernel}, 6, -0.5f, 0.5f)},
                        {"la.dt_bias", random_tensor({sh.n_v_head}, 7, 0.5f, 1.5f)},
                        {"la.A_log", random_tensor({sh.n_v_head}, 8, -1.0f, 1.5f)},
                        {"la.norm.weight", random_tensor({sh.d_v}, 9, 0.5f, 1.5f)}});
  io::WeightStore store = io::WeightStore::open(dir);
  GatedDeltaNet layer = GatedDeltaNet::load(WeightLoader(store, "la.", Device::cpu(), Dtype::f32), sh);

  const int64_t L = 70, P = 65;
  Tensor x = random_tensor({1, L, sh.hidden}, 10, -1, 1);
  auto whole = layer.make_cache();
  Tensor y_whole = layer.forward(x, *whole);
  ASSERT_EQ(y_whole.shape(), (Shape{1, L, sh.hidden}));

  auto split = layer.make_cache();
  std::vector<Tensor> parts = {layer.forward(x.slice(1, 0, P), *split)};
  for (int64_t t = P; t < L; ++t) parts.push_back(layer.forward(x.slice(1, t, t + 1), *split));
  Tensor y_split = ops::concat(parts, 1);
  EXPECT_LE(rel_diff(y_split, y_whole), 1e-4f);
  EXPECT_EQ(split->offset(), L);
  EXPECT_LE(rel_diff(split->recurrent_state(1), whole->recurrent_state(1)), 1e-4f);
  EXPECT_LE(rel_diff(split->conv_state(1), whole->conv_state(1)), 1e-6f);
}

}  // namespace
}  // namespace tern
