// bf16-first transitions: the storage converts exactly at the append that reaches `start` (the first
// append always stays unquantized), that append's read is the plain read, later reads see the
// quantized prefix and their own rows unquantized, and the reuse/append limits move accordingly.
#include "tern/state/transition_kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tern/ops/attention.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {
namespace {

Tensor randn(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - y[i]));
  return m;
}

// [prefix; rows] along dim 2 (both [B, H, *, D] f32).
Tensor concat_positions(const Tensor& prefix, const Tensor& rows) {
  const int64_t p = prefix.defined() ? prefix.size(2) : 0, n = rows.size(2);
  Tensor out = Tensor::empty({rows.size(0), rows.size(1), p + n, rows.size(3)}, Dtype::f32);
  if (p > 0) {
    Tensor head = out.slice(2, 0, p);
    head.copy_from(prefix);
  }
  Tensor tail = out.slice(2, p, p + n);
  tail.copy_from(rows);
  return out;
}

std::unique_ptr<QuantizedKVCache> storage(int which) {
  if (which == 0) return std::make_unique<AffineKVCache>(4, 32);
  return std::make_unique<TurboQuantKVCache>(8, 3, false);
}

TEST(TransitionKVCache, ConvertsExactlyAtStartForSeveralChunkings) {
  const int64_t T = 48;
  Tensor k = randn({1, 2, T, 64}, 1), v = randn({1, 2, T, 64}, 2), q = randn({1, 4, T, 64}, 3);
  const std::vector<std::vector<int64_t>> chunkings = {{48}, {16, 16, 16}, {7, 7, 7, 7, 7, 7, 6}, {1, 5, 11, 31},
                                                       std::vector<int64_t>(48, 1)};
  for (int which : {0, 1})
    for (int64_t start : {0, 1, 5, 16, 17, 40, 48, 100})
      for (const auto& chunks : chunkings) {
        SCOPED_TRACE("storage " + std::to_string(which) + " start " + std::to_string(start) + " chunks " +
                     std::to_string(chunks.size()));
        TransitionKVCache cache(start, storage(which));
        int64_t pos = 0;
        bool seen_convert = false;
        for (int64_t n : chunks) {
          const bool was = cache.converted();
          EXPECT_EQ(cache.signature(), was ? cache.quantized().signature() : pos == 0 ? "kv:bf16" : "kv:f32");
          if (!was) EXPECT_EQ(cache.max_append_tokens(), start == 0 && pos == 0 ? std::numeric_limits<int64_t>::max()
                                                                          : std::max<int64_t>(start - pos, 1));
          else EXPECT_EQ(cache.max_append_tokens(), std::numeric_limits<int64_t>::max());
          // The read the append must give: quantized prefix (once converted) plus its own rows as given.
          Tensor kp = was ? cache.quantized().dequantized_keys() : k.slice(2, 0, pos);
          Tensor vp = was ? cache.quantized().dequantized_values() : v.slice(2, 0, pos);
          Tensor kk = concat_positions(kp, k.slice(2, pos, pos + n)), vv = concat_positions(vp, v.slice(2, pos, pos + n));
          ops::AttentionMask mask;
          mask.q_offset = pos;
          Tensor qn = q.slice(2, pos, pos + n).contiguous();
          Tensor want = ops::sdpa(qn, kk, vv, 0.125f, mask);
          auto read = cache.append(k.slice(2, pos, pos + n).contiguous(), v.slice(2, pos, pos + n).contiguous(),
                                   n == 1 ? AppendPhase::decode : AppendPhase::window);
          EXPECT_LT(max_abs_diff(read->attend(qn, 0.125f), want), 1e-5) << "append at " << pos;
          pos += n;
          EXPECT_EQ(cache.offset(), pos);
          // converted iff this or an earlier append reached start
          EXPECT_EQ(cache.converted(), pos >= start);
          if (cache.converted() && !was) {
            EXPECT_FALSE(seen_convert);
            seen_convert = true;
            EXPECT_EQ(cache.transition_offset(), pos);
            // the read was unquantized: equal to attention over the raw rows
            EXPECT_EQ(cache.quantized().offset(), pos);
          }
          EXPECT_EQ(cache.minimum_reusable_offset(), cache.converted() ? cache.transition_offset() : 0);
        }
        EXPECT_EQ(seen_convert, start <= T);
      }
}

TEST(TransitionKVCache, FirstAppendStaysUnquantizedAndConversionIsIrreversible) {
  TransitionKVCache cache(0, storage(0));
  EXPECT_EQ(cache.max_append_tokens(), std::numeric_limits<int64_t>::max());  // any length, read unquantized
  Tensor k = randn({1, 1, 8, 64}, 4), v = randn({1, 1, 8, 64}, 5);
  auto read = cache.append(k, v, AppendPhase::window);
  EXPECT_TRUE(cache.converted());
  EXPECT_EQ(cache.transition_offset(), 8);
  EXPECT_EQ(cache.signature(), "kv:affine:4:32");
  EXPECT_GT(max_abs_diff(cache.quantized().dequantized_keys(), k), 0.0);
  EXPECT_EQ(cache.trim(5), 5);
  EXPECT_TRUE(cache.converted());
  EXPECT_EQ(cache.minimum_reusable_offset(), 3);
  EXPECT_EQ(cache.signature(), "kv:affine:4:32");
}

}  // namespace
}  // namespace tern
