// ops::norm_rope and ops::norm_rope_write on CUDA against the CPU (NMSE <= 1e-7 in f32, <= 1e-4 in
// bf16): the fused per-head norms and rotation, and the compiled decode step's form that writes the
// rotated keys and the values straight into a cache's storage. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "tern/ops/elementwise.h"
#include "tern/ops/norm.h"
#include "tern/ops/norm_rope.h"
#include "tern/ops/rope.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using cuda_test::kGpu;
using cuda_test::nmse;
using cuda_test::randint;

class CudaNormRope : public cuda_test::CudaTest {};

Tensor randn(const Shape& shape, Dtype dt, uint32_t seed) {
  Tensor t = cuda_test::randn(shape, seed);
  return dt == Dtype::f32 ? t : ops::cast(t, dt);
}

double tol(Dtype d) { return d == Dtype::f32 ? 1e-7 : 1e-4; }

#define EXPECT_CLOSE(ref, got, dtype) EXPECT_LE(nmse(ref, got), tol(dtype)) << "dtype " << dtype_name(dtype)

const Dtype kFloat[] = {Dtype::f32, Dtype::bf16};

TEST_F(CudaNormRope, NormRopeMatchesNormThenRope) {
  struct Case {
    int64_t d, rot, hq, hk;
    bool weights, per_row;
  };
  // bf16 heads of 128 with rot % 8 == 0 take the 4-dims-per-lane kernel; the rest the general one
  const Case cases[] = {{128, 128, 4, 2, true, false}, {128, 64, 4, 2, true, true},   {128, 36, 2, 2, false, true},
                        {64, 32, 3, 1, true, true},    {256, 256, 2, 2, false, true}, {96, 64, 2, 1, true, false}};
  for (Dtype dt : kFloat) {
    for (const Case& c : cases) {
      ops::RopeConfig cfg;
      cfg.head_dim = c.d, cfg.rotary_dim = c.rot, cfg.theta = 1e6;
      const ops::RopeTable table = ops::rope_table(cfg);
      const int64_t B = 2, L = 5;
      // one [B, L, (hq + hk) * d] projection output, split into q and k heads as Attention does
      Tensor qk = randn({B, L, (c.hq + c.hk) * c.d}, dt, 40);
      auto views = [&](const Tensor& t) {
        return std::pair{t.slice(2, 0, c.hq * c.d).view({B, L, c.hq, c.d}).transpose(1, 2),
                         t.slice(2, c.hq * c.d, (c.hq + c.hk) * c.d).view({B, L, c.hk, c.d}).transpose(1, 2)};
      };
      Tensor wq = c.weights ? randn({c.d}, dt, 41) : Tensor(), wk = c.weights ? randn({c.d}, dt, 42) : Tensor();
      Tensor pos = c.per_row ? randint({B, L}, 30000, Dtype::i32, 43) : randint({L}, 30000, Dtype::i64, 44);
      auto [q, k] = views(qk);
      ops::NormRoped ref = ops::norm_rope(q, k, wq, wk, 1e-6f, pos, table);
      Tensor qk_gpu = qk.to(kGpu);
      auto [gq, gk] = views(qk_gpu);
      ops::NormRoped got = ops::norm_rope(gq, gk, c.weights ? wq.to(kGpu) : Tensor(),
                                          c.weights ? wk.to(kGpu) : Tensor(), 1e-6f, pos.to(kGpu), table);
      EXPECT_CLOSE(ref.q, got.q, dt) << "d " << c.d;
      EXPECT_CLOSE(ref.k, got.k, dt) << "d " << c.d;
      // and the unfused GPU ops agree with the fused kernel to the rounding of the norm's sum
      Tensor unfused = ops::rope(ops::rms_norm(gq, c.weights ? wq.to(kGpu) : Tensor(), 1e-6f), pos.to(kGpu), table);
      EXPECT_CLOSE(unfused.to(Device::cpu()), got.q, dt);
    }
  }
}

// The decode step's form: q rotated as norm_rope rotates it; row b's rotated key and its value land at
// slot positions[b] (% ring) of the storage, a slot past the storage writes nothing, and every other
// slot keeps what it held.
TEST_F(CudaNormRope, WriteLandsInTheCacheSlots) {
  struct Case {
    int64_t d, rot, hq, hk, ring;
  };
  const Case cases[] = {{128, 128, 4, 2, 0}, {128, 64, 3, 1, 8}, {64, 32, 6, 2, 8}, {256, 256, 2, 1, 0}};
  const int64_t B = 3, N = 20;
  for (Dtype dt : kFloat) {
    for (const Case& c : cases) {
      ops::RopeConfig cfg;
      cfg.head_dim = c.d, cfg.rotary_dim = c.rot, cfg.theta = 1e6;
      const ops::RopeTable table = ops::rope_table(cfg);
      Tensor qkv = randn({B, 1, (c.hq + 2 * c.hk) * c.d}, dt, 50);
      auto views = [&](const Tensor& t) {  // q, k, v heads of one [B, 1, (hq + 2 hk) d] projection
        auto part = [&](int64_t from, int64_t heads) {
          return t.slice(2, from * c.d, (from + heads) * c.d).view({B, 1, heads, c.d}).transpose(1, 2);
        };
        return std::tuple{part(0, c.hq), part(c.hq, c.hk), part(c.hq + c.hk, c.hk)};
      };
      Tensor wq = randn({c.d}, dt, 51), wk = randn({c.d}, dt, 52);
      const std::vector<int32_t> pv = {5, 19, c.ring > 0 ? 27 : 25};  // row 2: slot 3 of a ring of 8, else past N
      Tensor pos = Tensor::from_vector(pv, {B, 1});
      Tensor keys = randn({B, c.hk, N, c.d}, dt, 53), values = randn({B, c.hk, N, c.d}, dt, 54);
      Tensor gkeys = keys.to(kGpu), gvalues = values.to(kGpu);
      auto [q, k, v] = views(qkv);
      Tensor g = qkv.to(kGpu);
      auto [gq, gk, gv] = views(g);
      Tensor got_q = ops::norm_rope_write(gq, gk, gv, wq.to(kGpu), wk.to(kGpu), 1e-6f, pos.to(kGpu), table, gkeys,
                                          gvalues, c.ring);
      const ops::NormRoped ref = ops::norm_rope(q, k, wq, wk, 1e-6f, pos, table);
      EXPECT_CLOSE(ref.q, got_q, dt) << "d " << c.d;
      Tensor hk = gkeys.to(Device::cpu()), hv = gvalues.to(Device::cpu());
      for (int64_t b = 0; b < B; ++b) {
        const int64_t slot = c.ring > 0 ? pv[b] % c.ring : pv[b];  // row 2 without a ring: past N, no slot
        for (int64_t n = 0; n < N; ++n) {
          Tensor got_k = hk.select(0, b).select(1, n), got_v = hv.select(0, b).select(1, n);
          if (n == slot) {
            EXPECT_CLOSE(ref.k.select(0, b).select(1, 0), got_k, dt) << "row " << b;
            EXPECT_EQ(nmse(v.select(0, b).select(1, 0), got_v), 0.0) << "row " << b;  // a copy: exact
          } else {
            EXPECT_EQ(nmse(keys.select(0, b).select(1, n), got_k), 0.0) << "row " << b << " slot " << n;
            EXPECT_EQ(nmse(values.select(0, b).select(1, n), got_v), 0.0) << "row " << b << " slot " << n;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
