// ops::norm_rope_write on the CPU: the decode step's rotated key and value land at the row's slot (% ring)
// and nothing else moves; a window of several positions is a clear error.
#include "tern/ops/norm_rope.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tern/base/error.h"

namespace tern {
namespace {

Tensor randn(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = d(rng);
  return Tensor::from_vector(v, shape);
}

TEST(NormRopeWrite, RotatedKeysAndValuesLandAtTheRingSlots) {
  const int64_t B = 2, Hq = 4, Hk = 2, D = 8, N = 4, ring = 4;
  ops::RopeConfig cfg;
  cfg.head_dim = D, cfg.rotary_dim = D, cfg.theta = 1e4;
  const ops::RopeTable table = ops::rope_table(cfg);
  Tensor q = randn({B, Hq, 1, D}, 1), k = randn({B, Hk, 1, D}, 2), v = randn({B, Hk, 1, D}, 3);
  Tensor wq = randn({D}, 4), wk = randn({D}, 5);
  Tensor keys = randn({B, Hk, N, D}, 6), values = randn({B, Hk, N, D}, 7);
  const std::vector<float> k0 = keys.to_f32_vector(), v0 = values.to_f32_vector();
  const std::vector<int32_t> pv = {6, 1};  // slots 2 and 1
  Tensor pos = Tensor::from_vector(pv, {B, 1});
  Tensor rq = ops::norm_rope_write(q, k, v, wq, wk, 1e-6f, pos, table, keys, values, ring);
  const ops::NormRoped ref = ops::norm_rope(q, k, wq, wk, 1e-6f, pos, table);
  EXPECT_EQ(rq.to_f32_vector(), ref.q.to_f32_vector());
  const std::vector<float> kk = keys.to_f32_vector(), vv = values.to_f32_vector();
  const std::vector<float> rk = ref.k.to_f32_vector(), vs = v.to_f32_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hk; ++h)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = static_cast<size_t>(((b * Hk + h) * N + n) * D + d),
                       s = static_cast<size_t>((b * Hk + h) * D + d);
          const bool at = n == pv[b] % ring;
          EXPECT_EQ(kk[i], at ? rk[s] : k0[i]) << b << " " << h << " " << n << " " << d;
          EXPECT_EQ(vv[i], at ? vs[s] : v0[i]) << b << " " << h << " " << n << " " << d;
        }
  // two positions per row are a prefill window, not a decode step
  Tensor q2 = randn({B, Hq, 2, D}, 8), k2 = randn({B, Hk, 2, D}, 9), v2 = randn({B, Hk, 2, D}, 10);
  try {
    ops::norm_rope_write(q2, k2, v2, wq, wk, 1e-6f, Tensor::from_vector(std::vector<int32_t>{0, 1}, {2}), table, keys,
                         values);
    FAIL() << "expected an error for L = 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one position per row"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern
