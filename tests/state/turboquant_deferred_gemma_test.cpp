// TurboQuant's deferred read on Gemma 4-shaped full-attention data (head_dim 512 as the fixture's and
// the real models' full layers, 2 KV heads under 4 query heads, attention scale 1 after q/k norms):
// the same attention output as the decoded read, through prefill chunks and decode steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tern/state/kv_cache_options.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {
namespace {

// Rows of unit RMS, as Gemma's q/k norms leave them (values get the same norm without a scale).
Tensor unit_rms_rows(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  const int64_t dim = shape.back();
  float* p = t.data<float>();
  for (int64_t r = 0; r < t.numel() / dim; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(p[r * dim + i] = d(rng)) * p[r * dim + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim));
    for (int64_t i = 0; i < dim; ++i) p[r * dim + i] *= inv;
  }
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - y[i]));
  return m;
}

TEST(TurboQuantDeferredRead, EqualsTheDecodedReadAtGemmaFullLayerShape) {
  constexpr int64_t D = 512, T = 90;
  for (const char* kind : {"turbo", "turbo:k8v4", "turbo:k8v2"}) {
    SCOPED_TRACE(kind);
    KVCacheOptions o;
    o.kind = kind;
    auto decoded = make_kv_cache(o, {.attention_index = 0, .attention_layers = 1, .deferred_values = false});
    auto deferred = make_kv_cache(o, {.attention_index = 0, .attention_layers = 1, .deferred_values = true});
    const auto* t = dynamic_cast<const TransitionKVCache*>(deferred.get());
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(dynamic_cast<const TurboQuantKVCache&>(t->quantized()).deferred_values());
    Tensor k = unit_rms_rows({1, 2, T, D}, 1), v = unit_rms_rows({1, 2, T, D}, 2), q = unit_rms_rows({1, 4, T, D}, 3);
    double worst = 0;
    int64_t pos = 0;
    for (int64_t n : {16, 16, 16, 16, 16, 7, 1, 1, 1}) {
      const AppendPhase ph = n == 1 ? AppendPhase::decode : AppendPhase::window;
      Tensor kn = k.slice(2, pos, pos + n).contiguous(), vn = v.slice(2, pos, pos + n).contiguous();
      Tensor qn = q.slice(2, pos, pos + n).contiguous();
      Tensor a = decoded->append(kn, vn, ph)->attend(qn, 1.0f);
      Tensor b = deferred->append(kn, vn, ph)->attend(qn, 1.0f);
      worst = std::max(worst, max_abs_diff(a, b));
      pos += n;
    }
    EXPECT_EQ(pos, T);
    EXPECT_TRUE(t->converted());
    std::printf("[ info     ] %s head_dim %lld: max |deferred - decoded| %.3g\n", kind, (long long)D, worst);
    EXPECT_LT(worst, 2e-5);
  }
}

}  // namespace
}  // namespace tern
