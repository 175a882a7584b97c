// ops::norm_rope and ops::norm_rope_write on CUDA against the CPU (NMSE <= 1e-7 in f32, <= 1e-4 in
// bf16): the fused per-head norms and rotation, and the compiled decode step's form that writes the
// rotated keys and the values straight into a cache's storage, and that form inside flash-decoding's launch
// (ops::norm_rope_write_sdpa). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
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
using cuda_test::ScopedEnv;

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

// The step's norm, rotation and key/value write inside flash-decoding's launch (TERN_CUDA_ROPE_IN_READ=1)
// against the two launches (norm_rope_write, then sdpa): the same output and the same storage, bit for bit,
// for head dims 64 and 128 (both row layouts at 128: rot % 8 == 0 or not), 1-16 query heads a kv head,
// rows at their own positions (one past the span's stale slots, one whose slot is outside the storage, one
// whose slot is inside the storage but past every split: split 0 writes it),
// spans that take one split, a cluster of splits or the global merge, with and without norm weights.
TEST_F(CudaNormRope, NormRopeInsideTheDecodeReadEqualsTheTwoLaunches) {
  ScopedEnv in_read("TERN_CUDA_ROPE_IN_READ", nullptr), splits_env("TERN_CUDA_DECODE_SPLITS", nullptr),
      cluster_env("TERN_CUDA_DECODE_CLUSTER", nullptr);
  struct Case {
    int64_t d, rot, hq, hk, span;
    bool weights;
  };
  const Case cases[] = {{128, 128, 16, 2, 40, true},  {128, 128, 8, 4, 300, true}, {128, 64, 4, 1, 700, true},
                        {128, 36, 2, 2, 5000, false}, {64, 64, 6, 2, 130, true},   {64, 32, 1, 1, 2100, true},
                        {128, 128, 4, 4, 9, false},   {128, 128, 16, 1, 600, true}};
  uint32_t seed = 900;
  for (const Case& c : cases) {
    ops::RopeConfig cfg;
    cfg.head_dim = c.d, cfg.rotary_dim = c.rot, cfg.theta = 1e6;
    const ops::RopeTable table = ops::rope_table(cfg);
    const int64_t B = 4, N = c.span + 16;
    Tensor qkv = randn({B, 1, (c.hq + 2 * c.hk) * c.d}, Dtype::bf16, seed += 7).to(kGpu);
    auto part = [&](int64_t from, int64_t heads) {  // q, k, v heads of one projection, as Attention views them
      return qkv.slice(2, from * c.d, (from + heads) * c.d).view({B, 1, heads, c.d}).transpose(1, 2);
    };
    const Tensor q = part(0, c.hq), k = part(c.hq, c.hk), v = part(c.hq + c.hk, c.hk);
    const Tensor wq = c.weights ? randn({c.d}, Dtype::bf16, seed + 1).to(kGpu) : Tensor();
    const Tensor wk = c.weights ? randn({c.d}, Dtype::bf16, seed + 2).to(kGpu) : Tensor();
    // row 0 at the span's last key, row 1 earlier (the span past it is stale storage), row 2 outside the
    // storage (no write, its read sees only older keys), row 3 in the storage past the span (written, not read)
    const std::vector<int32_t> pv = {static_cast<int32_t>(c.span - 1), static_cast<int32_t>(c.span / 2),
                                     static_cast<int32_t>(N + 3), static_cast<int32_t>(c.span + 2)};
    const std::vector<int32_t> lv = {pv[0] + 1, pv[1] + 1, static_cast<int32_t>(c.span), static_cast<int32_t>(c.span)};
    const Tensor pos = Tensor::from_vector(pv, {B, 1}).to(kGpu);
    ops::AttentionMask m;
    m.causal = false;
    m.kv_len = Tensor::from_vector(lv, {B}).to(kGpu);
    m.fresh_keys = 1;
    const Tensor keys0 = randn({B, c.hk, N, c.d}, Dtype::bf16, seed + 3).to(kGpu);
    const Tensor values0 = randn({B, c.hk, N, c.d}, Dtype::bf16, seed + 4).to(kGpu);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    for (const char* how : {"", "2", "global"}) {
      SCOPED_TRACE("d " + std::to_string(c.d) + " rot " + std::to_string(c.rot) + " hq " + std::to_string(c.hq) +
                   " hk " + std::to_string(c.hk) + " span " + std::to_string(c.span) + " splits " + how);
      const std::string h = how;
      splits_env.set(h == "2" ? "2" : h == "global" ? "3" : nullptr);
      cluster_env.set(h == "global" ? "0" : nullptr);
      Tensor keys_a = keys0.clone(), values_a = values0.clone();
      in_read.set(nullptr);
      Tensor rq = ops::norm_rope_write(q, k, v, wq, wk, 1e-6f, pos, table, keys_a, values_a);
      const Tensor want = ops::sdpa(rq, keys_a.slice(2, 0, c.span), values_a.slice(2, 0, c.span), scale, m);
      Tensor keys_b = keys0.clone(), values_b = values0.clone();
      in_read.set("1");
      const Tensor got =
          cuda::norm_rope_write_sdpa(q, k, v, wq, wk, 1e-6f, pos, table, keys_b, values_b, c.span, scale, m, 0.0f);
      ASSERT_TRUE(got.defined()) << "the one-launch form did not take the problem";
      const Tensor a = want.to(Device::cpu()), b = got.to(Device::cpu());
      EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0) << "nmse " << nmse(a, b);
      const Tensor ka = keys_a.to(Device::cpu()), kb = keys_b.to(Device::cpu());
      const Tensor va = values_a.to(Device::cpu()), vb = values_b.to(Device::cpu());
      EXPECT_EQ(std::memcmp(ka.data_ptr(), kb.data_ptr(), ka.nbytes()), 0) << "keys, nmse " << nmse(ka, kb);
      EXPECT_EQ(std::memcmp(va.data_ptr(), vb.data_ptr(), va.nbytes()), 0) << "values, nmse " << nmse(va, vb);
      // and through the op, which takes the one-launch form when asked
      Tensor keys_c = keys0.clone(), values_c = values0.clone();
      const Tensor via_op = ops::norm_rope_write_sdpa(q, k, v, wq, wk, 1e-6f, pos, table, keys_c, values_c, c.span,
                                                      scale, m, 0.0f)
                                .to(Device::cpu());
      EXPECT_EQ(std::memcmp(a.data_ptr(), via_op.data_ptr(), a.nbytes()), 0);
    }
  }
}

}  // namespace
}  // namespace tern
