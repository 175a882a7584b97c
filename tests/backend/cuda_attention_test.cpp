// ops::sdpa on CUDA against the CPU result (NMSE <= 1e-7 in f32, <= 1e-4 in bf16): the tensor-core
// prefill, flash-decoding with its key splits and their two merges, the row kernel, and heads wider
// than 256. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tern/ops/attention.h"
#include "tern/ops/elementwise.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using cuda_test::kGpu;
using cuda_test::nmse;
using cuda_test::ScopedEnv;

class CudaAttention : public cuda_test::CudaTest {};

// N(0, 1) values from seed in dtype dt (the f32 values rounded).
Tensor randn_as(const Shape& shape, Dtype dt, uint32_t seed) {
  Tensor t = cuda_test::randn(shape, seed);
  return dt == Dtype::f32 ? t : ops::cast(t, dt);
}

double tol(Dtype d) { return d == Dtype::f32 ? 1e-7 : 1e-4; }

const Dtype kFloat[] = {Dtype::f32, Dtype::bf16};

struct AttnCase {
  int64_t B, Hq, Hkv, Lq, Lk, D;
  bool causal;
  int64_t q_offset, window;
  bool kv_len, bias;
  float softcap;
};

void check_sdpa(const AttnCase& c, Dtype dt, uint32_t seed) {
  Tensor q = randn_as({c.B, c.Hq, c.Lq, c.D}, dt, seed);
  // k and v are views into a longer cache buffer, as a KV cache hands them out.
  Tensor kbuf = randn_as({c.B, c.Hkv, c.Lk + 8, c.D}, dt, seed + 1),
         vbuf = randn_as({c.B, c.Hkv, c.Lk + 8, c.D}, dt, seed + 2);
  Tensor k = kbuf.narrow(2, 0, c.Lk), v = vbuf.narrow(2, 0, c.Lk);
  ops::AttentionMask m;
  m.causal = c.causal;
  m.q_offset = c.q_offset;
  m.window = c.window;
  ops::AttentionMask mg = m;
  if (c.kv_len) {
    std::vector<int32_t> lens(c.B);
    for (int64_t b = 0; b < c.B; ++b) lens[b] = static_cast<int32_t>(c.Lk - 3 * b);
    m.kv_len = Tensor::from_vector(lens, {c.B});
    mg.kv_len = m.kv_len.to(kGpu);
  }
  if (c.bias) {
    m.bias = randn_as({1, c.Hq, c.Lq, c.Lk}, Dtype::f32, seed + 3);
    mg.bias = m.bias.to(kGpu);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  Tensor ref = ops::sdpa(q, k, v, scale, m, c.softcap);
  Tensor got =
      ops::sdpa(q.to(kGpu), kbuf.to(kGpu).narrow(2, 0, c.Lk), vbuf.to(kGpu).narrow(2, 0, c.Lk), scale, mg, c.softcap);
  EXPECT_EQ(shape_str(ref.shape()), shape_str(got.shape()));
  EXPECT_EQ(dtype_name(ref.dtype()), dtype_name(got.dtype()));
  EXPECT_LE(nmse(ref, got), tol(dt)) << dtype_name(dt) << " B" << c.B << " Hq" << c.Hq << " Hkv" << c.Hkv << " Lq"
                                     << c.Lq << " Lk" << c.Lk << " D" << c.D << " causal" << c.causal << " off"
                                     << c.q_offset << " win" << c.window << " kvlen" << c.kv_len << " bias" << c.bias
                                     << " cap" << c.softcap;
}

TEST_F(CudaAttention, SdpaPrefill) {
  const AttnCase cases[] = {
      {1, 4, 4, 33, 33, 64, true, 0, 0, false, false, 0.0f},
      {2, 8, 2, 70, 70, 128, true, 0, 0, false, false, 0.0f},
      {2, 8, 2, 64, 100, 128, true, 36, 0, false, false, 0.0f},
      {1, 4, 1, 80, 80, 128, true, 0, 16, false, false, 0.0f},
      {2, 4, 2, 40, 50, 256, true, 10, 0, true, false, 30.0f},
      {1, 2, 2, 17, 29, 64, false, 0, 0, false, true, 0.0f},
      {1, 16, 8, 130, 130, 128, true, 0, 0, false, false, 0.0f},
      {1, 4, 2, 5, 9, 96, true, 4, 0, false, false, 0.0f},
      // Longer rows, where whole key tiles go unmasked beside the tiles that cross a row's edge: a
      // window wider than a tile, a chunk over a prefix with per-row lengths, no mask, a capped 256.
      {1, 8, 2, 300, 300, 128, true, 0, 130, false, false, 0.0f},
      {2, 4, 2, 200, 517, 128, true, 317, 0, true, false, 0.0f},
      {1, 4, 2, 257, 257, 64, false, 0, 0, false, false, 0.0f},
      {1, 4, 2, 150, 150, 256, true, 0, 0, false, false, 20.0f},
      // Grids of >= 512 blocks of 128 rows (three waves of a GPU of up to 170 SMs): heads of 128 take
      // the kernel whose warps own two m-tiles.
      {4, 32, 8, 400, 400, 128, true, 0, 0, false, false, 0.0f},
      {4, 32, 8, 390, 600, 128, true, 210, 150, true, false, 0.0f},
      {4, 32, 4, 385, 385, 128, false, 0, 0, false, false, 30.0f},
  };
  uint32_t seed = 100;
  for (Dtype dt : kFloat) {
    for (const auto& c : cases) check_sdpa(c, dt, seed += 10);
  }
}

TEST_F(CudaAttention, SdpaDecodeSplitK) {
  const AttnCase cases[] = {
      {1, 32, 8, 1, 4096, 128, true, 4095, 0, false, false, 0.0f},
      {4, 8, 2, 1, 1500, 64, true, 1499, 0, true, false, 0.0f},
      {2, 8, 4, 1, 3000, 256, true, 2999, 512, false, false, 50.0f},
      {3, 4, 4, 2, 777, 128, true, 775, 0, false, false, 0.0f},
      {2, 8, 2, 4, 600, 128, true, 590, 0, true, false, 0.0f},
      {1, 16, 2, 2, 300, 64, true, 298, 100, false, false, 0.0f},
      {1, 8, 8, 1, 40, 128, false, 0, 0, false, false, 0.0f},
  };
  uint32_t seed = 300;
  for (Dtype dt : kFloat) {
    for (const auto& c : cases) check_sdpa(c, dt, seed += 10);
  }
}

// The split partials merged by the last split of each kv head (the default) and by a separate combine
// launch, at forced split counts up to the 64 maximum; a repeated call gives the same bits, so the last
// split left its counters at zero.
TEST_F(CudaAttention, SdpaDecodeMergesSplitsInTheLastBlock) {
  const AttnCase cases[] = {
      {1, 32, 8, 1, 8192, 128, true, 8191, 0, false, false, 0.0f},
      {2, 8, 2, 3, 2000, 64, true, 1997, 0, true, false, 0.0f},
      {1, 8, 2, 1, 3000, 512, true, 2999, 0, false, false, 0.0f},
  };
  uint32_t seed = 700;
  ScopedEnv splits_env("TERN_CUDA_DECODE_SPLITS", nullptr), combine_env("TERN_CUDA_DECODE_COMBINE", nullptr);
  for (const char* splits : {"2", "7", "64"}) {
    splits_env.set(splits);
    for (const char* combine : {"last-block", "launch"}) {
      combine_env.set(combine);
      for (const auto& c : cases) check_sdpa(c, Dtype::bf16, seed += 10);
    }
  }
  combine_env.set(nullptr);
  Tensor q = randn_as({1, 32, 1, 128}, Dtype::bf16, 800).to(kGpu);
  Tensor k = randn_as({1, 8, 4096, 128}, Dtype::bf16, 801).to(kGpu),
         v = randn_as({1, 8, 4096, 128}, Dtype::bf16, 802).to(kGpu);
  ops::AttentionMask m;
  m.q_offset = 4095;
  const std::vector<float> first = ops::sdpa(q, k, v, 0.088f, m).to(Device::cpu()).to_f32_vector();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ops::sdpa(q, k, v, 0.088f, m).to(Device::cpu()).to_f32_vector(), first) << "call " << i + 2;
  }
}

// The head-128 decode kernel's two key tiles (TERN_CUDA_DECODE_TILE; batch 1 takes 32 keys, larger grids
// 16) against the CPU: one split, forced splits, lengths that end inside a tile, several queries per
// row, a window and per-row lengths.
TEST_F(CudaAttention, SdpaDecodeTileVariants) {
  const AttnCase cases[] = {
      {1, 32, 8, 1, 4096, 128, true, 4095, 0, false, false, 0.0f},
      {3, 4, 4, 2, 777, 128, true, 775, 0, false, false, 0.0f},
      {2, 8, 2, 4, 600, 128, true, 590, 100, true, false, 0.0f},
      {1, 32, 4, 1, 200, 128, true, 199, 0, false, false, 0.0f},
  };
  uint32_t seed = 900;
  ScopedEnv tile_env("TERN_CUDA_DECODE_TILE", nullptr), splits_env("TERN_CUDA_DECODE_SPLITS", nullptr);
  for (const char* tile : {"16x2", "32x2"}) {
    SCOPED_TRACE(tile);
    tile_env.set(tile);
    for (const char* splits : {"", "1", "5"}) {
      splits_env.set(splits);
      for (const auto& c : cases) check_sdpa(c, Dtype::bf16, seed += 10);
    }
  }
}

// Flash-decoding's splits merged inside a thread-block cluster (spans of up to 512 keys by default, or
// forced split counts of 2-8) against the CPU, and the same problems with the global merge: spans that
// end inside a split or leave splits empty (per-row lengths), 1-8 query heads a kv head, several queries
// a row, a window, a soft cap, head dims 64 and 128, and the cluster merge again with 32-key tiles.
TEST_F(CudaAttention, SdpaDecodeClusterMerge) {
  const AttnCase cases[] = {
      {1, 32, 4, 1, 256, 128, true, 255, 0, false, false, 0.0f},
      {1, 16, 8, 1, 200, 128, true, 199, 0, true, false, 0.0f},
      {2, 8, 8, 1, 512, 128, true, 511, 0, true, false, 0.0f},
      {3, 4, 4, 2, 300, 128, true, 298, 0, false, false, 0.0f},
      {2, 8, 2, 4, 450, 128, true, 446, 100, true, false, 0.0f},
      {1, 8, 1, 1, 96, 64, true, 95, 0, false, false, 0.0f},
      {2, 16, 8, 1, 380, 64, true, 379, 0, true, false, 30.0f},
      {1, 32, 8, 1, 777, 128, true, 776, 0, false, false, 0.0f},
  };
  uint32_t seed = 1300;
  ScopedEnv cluster_env("TERN_CUDA_DECODE_CLUSTER", nullptr), splits_env("TERN_CUDA_DECODE_SPLITS", nullptr);
  for (const char* cluster : {"1", "0"}) {
    SCOPED_TRACE(cluster);
    cluster_env.set(cluster);
    for (const char* splits : {"", "2", "3", "8"}) {
      SCOPED_TRACE(splits);
      splits_env.set(splits);
      for (const auto& c : cases) check_sdpa(c, Dtype::bf16, seed += 10);
    }
  }
  cluster_env.set("1");
  splits_env.set(nullptr);
  ScopedEnv tile_env("TERN_CUDA_DECODE_TILE", "32x2");
  for (const auto& c : cases) check_sdpa(c, Dtype::bf16, seed += 10);
}

// A read that promises its older keys were written before the work just before it (fresh_keys >= 0,
// the plain cache's compiled step) lets flash-decoding stage them before its grid wait: the same bits
// as without the promise, for spans of one to many tiles, forced splits with either merge, the 32-key
// tiles, head dims 64-256 and per-row lengths (one row's length inside its first tile).
TEST_F(CudaAttention, SdpaDecodeStagesOldKeysBeforeTheWait) {
  ScopedEnv cluster_env("TERN_CUDA_DECODE_CLUSTER", nullptr), splits_env("TERN_CUDA_DECODE_SPLITS", nullptr),
      tile_env("TERN_CUDA_DECODE_TILE", nullptr);
  uint32_t seed = 1700;
  for (int64_t D : {64, 128, 256}) {
    for (int64_t Lk : {5, 40, 256, 700, 5000}) {
      const int64_t B = 3, Hq = 16, Hkv = 4;
      Tensor q = randn_as({B, Hq, 1, D}, Dtype::bf16, seed += 3).to(kGpu);
      Tensor k = randn_as({B, Hkv, Lk + 8, D}, Dtype::bf16, seed + 1).to(kGpu).narrow(2, 0, Lk);
      Tensor v = randn_as({B, Hkv, Lk + 8, D}, Dtype::bf16, seed + 2).to(kGpu).narrow(2, 0, Lk);
      ops::AttentionMask m;
      m.causal = false;
      const std::vector<int32_t> lens = {static_cast<int32_t>(Lk), static_cast<int32_t>(std::max<int64_t>(1, Lk - 37)),
                                         static_cast<int32_t>(std::min<int64_t>(Lk, 3))};
      m.kv_len = Tensor::from_vector(lens, {B}).to(kGpu);
      for (const char* cfg : {"", "2", "8", "tile", "global"}) {
        SCOPED_TRACE(std::string("D ") + std::to_string(D) + " Lk " + std::to_string(Lk) + " cfg " + cfg);
        const std::string c = cfg;
        splits_env.set(c == "2" || c == "8" ? cfg : c == "global" ? "3" : nullptr);
        cluster_env.set(c == "global" ? "0" : nullptr);
        tile_env.set(c == "tile" ? "32x2" : nullptr);
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        m.fresh_keys = -1;
        Tensor want = ops::sdpa(q, k, v, scale, m).to(Device::cpu());
        for (int64_t fresh : {0, 1, 20}) {
          m.fresh_keys = fresh;
          Tensor got = ops::sdpa(q, k, v, scale, m).to(Device::cpu());
          EXPECT_EQ(std::memcmp(want.data_ptr(), got.data_ptr(), want.nbytes()), 0) << "fresh " << fresh;
        }
      }
    }
  }
}

// Flash-decoding keeps key positions in 32 bits: a query offset past 2^31 is refused with a message, not
// read with wrapped positions.
TEST_F(CudaAttention, SdpaDecodeRefusesPositionsPast32Bits) {
  const Tensor q = randn_as({1, 8, 1, 128}, Dtype::bf16, 7).to(kGpu);
  const Tensor k = randn_as({1, 2, 16, 128}, Dtype::bf16, 8).to(kGpu);
  const Tensor v = randn_as({1, 2, 16, 128}, Dtype::bf16, 9).to(kGpu);
  ops::AttentionMask m;
  m.causal = true;
  m.q_offset = int64_t{1} << 31;
  try {
    ops::sdpa(q, k, v, 0.088f, m);
    ADD_FAILURE() << "expected an error for a query offset of 2^31";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("below 2^31"), std::string::npos) << e.what();
  }
  m.q_offset = 15;  // the same read at a position that fits
  EXPECT_NO_THROW(ops::sdpa(q, k, v, 0.088f, m));
}

// Heads wider than the kernels' 256 (Gemma 4's full layers: 512): bf16/f16 512-dim heads run the
// tensor-core prefill and flash-decoding (scores over all 512 dims, values in two launches); f32, a
// bias, other widths, or > 16 rows per kv head in < 16 queries go through ops::sdpa_split_heads (the
// dims past 256 as an f32 score bias).
TEST_F(CudaAttention, SdpaWideHeads) {
  const AttnCase cases[] = {
      {1, 4, 2, 33, 33, 512, true, 0, 0, false, false, 0.0f},
      {2, 8, 2, 130, 200, 512, true, 70, 0, true, false, 0.0f},
      {1, 4, 1, 150, 150, 512, true, 0, 48, false, false, 0.0f},
      {1, 2, 2, 20, 20, 512, true, 0, 0, false, true, 0.0f},
      {1, 4, 2, 1, 40, 512, true, 39, 0, false, false, 0.0f},
      {1, 8, 2, 1, 3000, 512, true, 2999, 0, false, false, 0.0f},
      {2, 8, 2, 2, 1100, 512, true, 1098, 300, true, false, 0.0f},
      {2, 8, 2, 5, 60, 512, true, 55, 16, true, false, 0.0f},
      {1, 2, 2, 9, 9, 320, false, 0, 0, false, true, 0.0f},
  };
  uint32_t seed = 500;
  for (Dtype dt : kFloat) {
    for (const auto& c : cases) check_sdpa(c, dt, seed += 10);
  }
  // A soft cap needs the whole score: at 512 dims only the tensor-core kernel takes one.
  check_sdpa({1, 2, 2, 64, 96, 512, false, 0, 0, false, false, 25.0f}, Dtype::bf16, seed += 10);
  check_sdpa({1, 8, 2, 1, 2000, 512, true, 1999, 0, false, false, 25.0f}, Dtype::bf16, seed += 10);
}

}  // namespace
}  // namespace tern
