// Affine storage on a sliding-window ring: reads equal attention over the row-wise quantized history
// under the window mask (for chunkings that wrap), stored rows within the affine error bound of the
// plain ring's, trim before the wrap only, the bf16-first transition keeping the ring phase, and the
// factory's choice per kind.
#include "tern/state/affine_ring_kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "tern/ops/affine_codec.h"
#include "tern/ops/attention.h"
#include "tern/state/kv_cache_options.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/ring_transition_kv_cache.h"

namespace tern {
namespace {

constexpr int64_t kWindow = 16, kT = 80, kD = 64;

Tensor randn(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng) * (1.0f + 0.1f * static_cast<float>(i % 7));
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - y[i]));
  return m;
}

// Every head row of x [B, H, T, D] through the affine codec (encode, then decode).
Tensor round_trip(const Tensor& x, int bits, int64_t group) {
  AffineRowCodec c{bits, group, x.size(3)};
  Tensor in = x.contiguous(), out = Tensor::empty(x.shape(), Dtype::f32);
  std::vector<uint8_t> buf(static_cast<size_t>(c.row_bytes()));
  for (int64_t r = 0; r < in.numel() / x.size(3); ++r) {
    c.encode(in.data<float>() + r * x.size(3), buf.data());
    c.decode(buf.data(), out.data<float>() + r * x.size(3));
  }
  return out;
}

// The read of queries at [pos, pos + n) over the whole history: positions before pos from `stored`
// (what the cache holds for them), the appended ones from `raw`, under a causal window mask.
Tensor reference_read(const Tensor& q, const Tensor& stored, const Tensor& raw, int64_t pos, int64_t n) {
  Tensor k = Tensor::empty({raw.size(0), raw.size(1), pos + n, raw.size(3)}, Dtype::f32);
  if (pos > 0) k.slice(2, 0, pos).copy_from(stored.slice(2, 0, pos));
  k.slice(2, pos, pos + n).copy_from(raw.slice(2, pos, pos + n));
  ops::AttentionMask mask;
  mask.causal = true;
  mask.q_offset = pos;
  mask.window = kWindow;
  return ops::sdpa(q.slice(2, pos, pos + n).contiguous(), k, k, 0.125f, mask);
}

// Bound of one affine-coded element: half a step, plus the f16 rounding of the scale and the bias.
double affine_bound(const float* g, int64_t group, int bits) {
  float lo = g[0], hi = g[0];
  for (int64_t i = 1; i < group; ++i) lo = std::min(lo, g[i]), hi = std::max(hi, g[i]);
  const double range = hi - lo;
  return 0.5 * range / ((1 << bits) - 1) * 1.01 + (range + std::fabs(lo)) * std::ldexp(1.0, -10) + 1e-6;
}

void expect_within_affine_bound(const Tensor& got, const Tensor& want, int bits, int64_t group) {
  Tensor g = got.contiguous(), w = want.contiguous();
  ASSERT_EQ(g.shape(), w.shape());
  int64_t over = 0, first = -1;
  for (int64_t s = 0; s < w.numel(); s += group) {
    const double bound = affine_bound(w.data<float>() + s, group, bits);
    for (int64_t i = 0; i < group; ++i)
      if (std::fabs(double(g.data<float>()[s + i]) - w.data<float>()[s + i]) > bound) first = first < 0 ? s + i : first, ++over;
  }
  EXPECT_EQ(over, 0) << "first element past the bound: " << first;
}

TEST(AffineRingKVCache, ReadsMatchTheQuantizedHistoryUnderTheWindowForSeveralChunkings) {
  Tensor x = randn({2, 2, kT, kD}, 1), q = randn({2, 4, kT, kD}, 2);
  for (int bits : {8, 4})
    for (int64_t chunk : {1, 5, 16, 17, 40}) {
      SCOPED_TRACE("bits " + std::to_string(bits) + " chunk " + std::to_string(chunk));
      AffineRingKVCache cache(kWindow, bits, 32);
      RingKVCache plain(kWindow);
      EXPECT_EQ(cache.signature(), "kv:ring:16:affine:" + std::to_string(bits) + ":32");
      const Tensor stored = round_trip(x, bits, 32);
      double worst = 0, sum_e = 0, sum_w = 0;
      for (int64_t pos = 0; pos < kT; pos += chunk) {
        const int64_t n = std::min(chunk, kT - pos);
        Tensor xn = x.slice(2, pos, pos + n).contiguous();
        const AppendPhase ph = n == 1 ? AppendPhase::decode : AppendPhase::window;
        Tensor got = cache.append(xn, xn, ph)->attend(q.slice(2, pos, pos + n).contiguous(), 0.125f);
        Tensor exact = plain.append(xn, xn, ph)->attend(q.slice(2, pos, pos + n).contiguous(), 0.125f);
        worst = std::max(worst, max_abs_diff(got, reference_read(q, stored, x, pos, n)));
        std::vector<float> a = got.to_f32_vector(), b = exact.to_f32_vector();
        for (size_t i = 0; i < a.size(); ++i) sum_e += (a[i] - b[i]) * (a[i] - b[i]), sum_w += b[i] * b[i];
        EXPECT_EQ(cache.offset(), pos + n);
        EXPECT_EQ(cache.stored(), std::min(pos + n, kWindow));
        expect_within_affine_bound(cache.temporal_keys(), plain.temporal_keys(), bits, 32);
        expect_within_affine_bound(cache.temporal_values(), plain.temporal_values(), bits, 32);
      }
      EXPECT_LT(worst, 2e-5);
      const double nmse = sum_e / sum_w;
      std::printf("[ info     ] affine%d chunk %lld: read NMSE vs the plain ring %.3g\n", bits, (long long)chunk, nmse);
      EXPECT_GT(nmse, 0.0);
      EXPECT_LT(nmse, bits == 8 ? 1e-4 : 2.5e-2);  // the bounds of the unwindowed affine storage's test
      EXPECT_FALSE(cache.is_trimmable());
      // two rings of at most `window` slots of 4 rows (vector growth may double a capacity)
      EXPECT_GE(cache.bytes(), 2 * kWindow * 4 * AffineRowCodec::row_bytes(bits, 32, kD));
      EXPECT_LE(cache.bytes(), 4 * kWindow * 4 * AffineRowCodec::row_bytes(bits, 32, kD));
    }
}

// The compiled step on the CPU: one ring decodes ordinarily, the other through a DeviceStep (row b at
// positions[b], which the host advances), both from the same prefill, past the wrap and again after the
// step is detached. Reads agree to rounding (the same keys in another order), and the stored rows are
// the same bytes.
TEST(AffineRingKVCache, DecodeThroughADeviceStepMatchesOrdinaryDecode) {
  const int64_t B = 2, Hkv = 2, Hq = 4, P = 11, steps = 3 * kWindow;
  for (int bits : {8, 4})
    for (int64_t prefill : {int64_t(1), P, kWindow + 5}) {
      SCOPED_TRACE("bits " + std::to_string(bits) + " prefill " + std::to_string(prefill));
      AffineRingKVCache plain(kWindow, bits, 32), stepped(kWindow, bits, 32);
      Tensor k0 = randn({B, Hkv, prefill, kD}, 3), v0 = randn({B, Hkv, prefill, kD}, 4);
      const AppendPhase ph0 = prefill == 1 ? AppendPhase::decode : AppendPhase::window;
      plain.append(k0, v0, ph0);
      stepped.append(k0, v0, ph0);
      ASSERT_TRUE(stepped.supports_device_step());
      stepped.reserve(prefill + steps);
      DeviceStep step;
      step.span = prefill + steps;
      uint32_t seed = 100;
      for (int64_t s = 0; s < steps; ++s) {
        const int32_t p = static_cast<int32_t>(prefill + s);
        step.positions = Tensor::from_vector(std::vector<int32_t>(B, p), {B});
        step.lengths = Tensor::from_vector(std::vector<int32_t>(B, p + 1), {B});
        const bool attached = s < steps - 2;  // the last two steps run detached again
        if (attached) stepped.attach_step(&step);
        Tensor q = randn({B, Hq, 1, kD}, ++seed), k = randn({B, Hkv, 1, kD}, ++seed), v = randn({B, Hkv, 1, kD}, ++seed);
        if (attached) {
          Tensor pos = stepped.next_positions(1);
          ASSERT_EQ(pos.shape(), Shape({B, 1}));
          EXPECT_EQ(pos.data<int32_t>()[B - 1], p);
        }
        Tensor want = plain.append(k, v, AppendPhase::decode)->attend(q, 0.125f);
        Tensor got = stepped.append(k, v, AppendPhase::decode)->attend(q, 0.125f);
        EXPECT_LT(max_abs_diff(want, got), 2e-6) << "step " << s;
        if (attached) {
          EXPECT_EQ(stepped.offset(), p);
          EXPECT_THROW(stepped.trim(1), Error);
          stepped.advance(1);
          stepped.attach_step(nullptr);
        }
        ASSERT_EQ(stepped.offset(), plain.offset());
      }
      EXPECT_EQ(max_abs_diff(stepped.temporal_keys(), plain.temporal_keys()), 0.0);
      EXPECT_EQ(max_abs_diff(stepped.temporal_values(), plain.temporal_values()), 0.0);
    }
  // A window append under a step, and a step before the first append, are refused.
  AffineRingKVCache fresh(kWindow, 8, 32);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{0}, {1});
  EXPECT_THROW(fresh.attach_step(&step), Error);
  EXPECT_THROW(fresh.reserve(4), Error);
  fresh.append(randn({1, 2, 3, kD}, 5), randn({1, 2, 3, kD}, 6), AppendPhase::window);
  step.positions = Tensor::from_vector(std::vector<int32_t>{3}, {1});
  fresh.attach_step(&step);
  EXPECT_THROW(fresh.append(randn({1, 2, 2, kD}, 7), randn({1, 2, 2, kD}, 8), AppendPhase::window), Error);
  EXPECT_THROW(fresh.spec_round_begin(), Error);
}

TEST(AffineRingKVCache, TrimsBeforeTheWrapOnly) {
  Tensor x = randn({1, 2, 40, kD}, 3);
  AffineRingKVCache cache(kWindow, 8, 64);
  cache.append(x.slice(2, 0, 10).contiguous(), x.slice(2, 0, 10).contiguous(), AppendPhase::window);
  EXPECT_TRUE(cache.is_trimmable());
  EXPECT_EQ(cache.trim(4), 4);
  EXPECT_EQ(cache.offset(), 6);
  // positions 6..11 are new rows; the kept 0..5 stay
  Tensor y = x.slice(2, 20, 26).contiguous();
  cache.append(y, y, AppendPhase::window);
  Tensor want = Tensor::empty({1, 2, 12, kD}, Dtype::f32);
  want.slice(2, 0, 6).copy_from(x.slice(2, 0, 6));
  want.slice(2, 6, 12).copy_from(y);
  EXPECT_LT(max_abs_diff(cache.temporal_keys(), round_trip(want, 8, 64)), 1e-6);
  EXPECT_EQ(cache.trim(100), 12);
  EXPECT_EQ(cache.offset(), 0);
  cache.append(x.slice(2, 0, 17).contiguous(), x.slice(2, 0, 17).contiguous(), AppendPhase::window);
  EXPECT_FALSE(cache.is_trimmable());
  try {
    cache.trim(1);
    ADD_FAILURE() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrapped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.offset(), 17);
}

TEST(RingTransitionKVCache, ConvertsAtStartKeepingTheRingPhase) {
  Tensor x = randn({1, 2, kT, kD}, 4), q = randn({1, 4, kT, kD}, 5);
  const Tensor stored = round_trip(x, 4, 64);
  for (int64_t start : {0, 5, 16, 17, 40})
    for (int64_t chunk : {1, 5, 16, 17, 40}) {
      SCOPED_TRACE("start " + std::to_string(start) + " chunk " + std::to_string(chunk));
      RingTransitionKVCache cache(start, std::make_unique<AffineRingKVCache>(kWindow, 4, 64));
      EXPECT_EQ(cache.signature(), "kv:bf16:ring:16");
      int64_t converted_at = -1;
      for (int64_t pos = 0; pos < kT; pos += chunk) {
        const int64_t n = std::min(chunk, kT - pos);
        const bool was = cache.converted();
        if (!was) EXPECT_EQ(cache.max_append_tokens(), start == 0 && pos == 0 ? std::numeric_limits<int64_t>::max()
                                                                          : std::max<int64_t>(start - pos, 1));
        Tensor xn = x.slice(2, pos, pos + n).contiguous();
        Tensor got = cache.append(xn, xn, n == 1 ? AppendPhase::decode : AppendPhase::window)
                         ->attend(q.slice(2, pos, pos + n).contiguous(), 0.125f);
        // Before the transition the read is the plain one; after it the prefix is the quantized rows.
        EXPECT_LT(max_abs_diff(got, reference_read(q, was ? stored : x, x, pos, n)), 2e-5) << "pos " << pos;
        if (!was && cache.converted()) {
          converted_at = pos + n;
          EXPECT_GE(pos + n, start);
          EXPECT_TRUE(pos == 0 || pos < start);
          // The converted ring holds the same positions, quantized, in time order.
          const int64_t held = std::min(pos + n, kWindow);
          EXPECT_LT(max_abs_diff(cache.quantized().temporal_keys(), stored.slice(2, pos + n - held, pos + n)), 1e-6);
        }
        EXPECT_EQ(cache.offset(), pos + n);
        EXPECT_EQ(cache.signature(), cache.converted() ? "kv:ring:16:affine:4:64" : "kv:f32:ring:16");
      }
      ASSERT_GE(converted_at, 0);
      EXPECT_EQ(converted_at, start == 0 ? std::min(chunk, kT) : ((start + chunk - 1) / chunk) * chunk);
      EXPECT_EQ(cache.transition_offset(), converted_at);
      EXPECT_EQ(cache.minimum_reusable_offset(), converted_at);
      EXPECT_EQ(cache.plain().bytes(), 0);
    }
}

// Compiled decode follows the affine ring once the transition has happened, never before it.
TEST(RingTransitionKVCache, TakesCompiledStepsOnceConverted) {
  RingTransitionKVCache cache(20, std::make_unique<AffineRingKVCache>(kWindow, 8, 32));
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>{12}, {1});
  cache.append(randn({1, 2, 12, kD}, 8), randn({1, 2, 12, kD}, 9), AppendPhase::window);
  EXPECT_FALSE(cache.converted());
  EXPECT_FALSE(cache.supports_device_step());
  EXPECT_THROW(cache.attach_step(&step), Error);
  EXPECT_THROW(cache.reserve(40), Error);
  cache.append(randn({1, 2, 10, kD}, 10), randn({1, 2, 10, kD}, 11), AppendPhase::window);
  ASSERT_TRUE(cache.converted());
  EXPECT_TRUE(cache.supports_device_step());
  cache.reserve(40);
  step.positions = Tensor::from_vector(std::vector<int32_t>{22}, {1});
  cache.attach_step(&step);
  Tensor k = randn({1, 2, 1, kD}, 12);
  cache.append(k, k, AppendPhase::decode)->attend(randn({1, 4, 1, kD}, 13), 0.125f);
  EXPECT_EQ(cache.offset(), 22);
  cache.advance(1);
  cache.attach_step(nullptr);
  EXPECT_EQ(cache.offset(), 23);
}

TEST(KVCacheFactory, SlidingLayersTakeTheAffineRingButNotTurboQuant) {
  KVCacheOptions o;
  const KVLayerInfo sliding{.attention_index = 1, .attention_layers = 4, .window = 16};
  for (const char* kind : {"affine8", "affine4"}) {
    o.kind = kind;
    EXPECT_TRUE(kv_layer_is_quantized(o, sliding)) << kind;
    auto c = make_kv_cache(o, sliding);
    auto* t = dynamic_cast<RingTransitionKVCache*>(c.get());
    ASSERT_NE(t, nullptr) << kind;
    EXPECT_EQ(t->quantized().signature(), std::string("kv:ring:16:affine:") + (kind[6] == '8' ? "8" : "4") + ":64");
    EXPECT_EQ(kv_bytes_per_token(o, sliding, 2, 64, 64, 4), 2 * 2 * AffineRowCodec::row_bytes(kind[6] - '0', 64, 64));
  }
  o.boundary = 1;
  EXPECT_FALSE(kv_layer_is_quantized(o, {.attention_index = 0, .attention_layers = 4, .window = 16}));
  o.boundary = 0;
  for (const char* kind : {"turbo", "turbo:k8v4", "bf16"}) {
    o.kind = kind;
    EXPECT_FALSE(kv_layer_is_quantized(o, sliding)) << kind;
    auto c = make_kv_cache(o, sliding);
    EXPECT_NE(dynamic_cast<RingKVCache*>(c.get()), nullptr) << kind;
    EXPECT_EQ(kv_bytes_per_token(o, sliding, 2, 64, 64, 4), 2 * 2 * 64 * 4) << kind;
  }
}

}  // namespace
}  // namespace tern
