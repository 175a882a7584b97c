// Quantized KV storages (affine, TurboQuant) behind the cache contract: codec error bounds, attention
// over quantized storage against plain attention (NMSE per scheme), the deferred TurboQuant read
// against the decoded one, trimming by whole positions, signatures, sizes and the factory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "tern/ops/affine_codec.h"
#include "tern/ops/kv_quant.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/kv_cache_options.h"
#include "tern/state/plain_kv_cache.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {
namespace {

Tensor randn(const Shape& shape, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

double nmse(const Tensor& got, const Tensor& want) {
  std::vector<float> a = got.to_f32_vector(), b = want.to_f32_vector();
  EXPECT_EQ(a.size(), b.size());
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += double(b[i]) * b[i];
  }
  return e / s;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - y[i]));
  return m;
}

TEST(AffineCodec, ErrorWithinHalfAStepPerGroup) {
  for (int bits : {4, 8})
    for (int64_t group : {32, 64, 128}) {
      AffineRowCodec c{bits, group, 128};
      EXPECT_EQ(c.row_bytes(), 128 * bits / 8 + 4 * (128 / group));
      Tensor x = randn({128}, 5 + bits, 1.5f);
      float* xp = x.data<float>();
      xp[3] = 9.0f;
      std::vector<uint8_t> row(c.row_bytes());
      std::vector<float> y(128);
      c.encode(xp, row.data());
      c.decode(row.data(), y.data());
      for (int64_t g = 0; g < 128 / group; ++g) {
        float lo = xp[g * group], hi = lo;
        for (int64_t i = 0; i < group; ++i) {
          lo = std::min(lo, xp[g * group + i]);
          hi = std::max(hi, xp[g * group + i]);
        }
        // half a step, plus the f16 rounding of scale (over 2^bits - 1 steps) and of the minimum
        const float step = (hi - lo) / ((1 << bits) - 1);
        const float bound = 0.5f * step + (hi - lo) * 1e-3f + std::fabs(lo) * 1e-3f;
        for (int64_t i = 0; i < group; ++i)
          EXPECT_LE(std::fabs(y[g * group + i] - xp[g * group + i]), bound) << bits << " " << group << " " << i;
      }
    }
}

std::unique_ptr<KVCache> make(const std::string& kind, bool deferred = false, int64_t group = 64) {
  KVCacheOptions o;
  o.kind = kind;
  o.group = group;
  return make_kv_cache(o, {.attention_index = 0, .attention_layers = 1, .window = 0, .deferred_values = deferred});
}

// Attention of a 16-query window over a 112-position context whose first 96 positions were stored
// (and quantized) by an earlier append, against the same through the plain cache.
Tensor window_read(KVCache& cache, const Tensor& k, const Tensor& v, const Tensor& q) {
  cache.append(k.slice(2, 0, 96).contiguous(), v.slice(2, 0, 96).contiguous(), AppendPhase::window);
  auto read = cache.append(k.slice(2, 96, 112).contiguous(), v.slice(2, 96, 112).contiguous(), AppendPhase::window);
  return read->attend(q, 0.125f);
}

struct SchemeBound {
  const char* kind;
  double max_nmse;  // about 1.5x the error the scheme's keys and values predict (see below)
};

TEST(QuantizedKVCache, AttentionNmseAgainstPlainPerScheme) {
  // Unit Gaussians, logits of unit spread: the output NMSE is about the value distortion plus as much
  // again from the key distortion. Affine b bits over 64 Gaussians: step ~ 4.9 / (2^b - 1), error
  // step^2 / 12 for keys and values (affine8 ~6e-5, affine4 ~1.7e-2); TurboQuant: int8 keys ~3e-5 and
  // the Lloyd-Max distortion of V bits (k8v8 ~7e-5, k8v4 ~9.5e-3, k8v3 ~3.5e-2, k8v2 ~0.12); rotated
  // TurboQuant_mse keys of K bits add the Lloyd-Max distortion of K bits (k4v4 ~1.9e-2, k3v3 ~7e-2).
  const SchemeBound schemes[] = {{"affine8", 1e-4},      {"affine4", 2.5e-2}, {"turbo:k8v8", 1.5e-4},
                                 {"turbo:k8v4", 1.5e-2}, {"turbo", 5e-2},     {"turbo:k8v2", 0.18},
                                 {"turbo:k4v4", 3e-2},   {"turbo:k3v3", 0.1}};
  Tensor k = randn({1, 2, 112, 64}, 1), v = randn({1, 2, 112, 64}, 2), q = randn({1, 4, 16, 64}, 3);
  PlainKVCache plain;
  Tensor want = window_read(plain, k, v, q);
  for (const SchemeBound& s : schemes) {
    auto cache = make(s.kind);
    Tensor got = window_read(*cache, k, v, q);
    const double e = nmse(got, want);
    std::printf("[ info     ] %s attention NMSE %.3g (bound %.3g)\n", s.kind, e, s.max_nmse);
    EXPECT_LT(e, s.max_nmse) << s.kind;
    EXPECT_GT(e, 0.0) << s.kind << ": the prefix should have been quantized";
  }
}

TEST(QuantizedKVCache, DeferredReadEqualsDecodedRead) {
  for (const char* kind : {"turbo", "turbo:k8v4", "turbo:k8v2", "turbo:k4v4", "turbo:k3v2"}) {
    Tensor k = randn({2, 2, 112, 64}, 4), v = randn({2, 2, 112, 64}, 5), q = randn({2, 6, 16, 64}, 6);
    auto decoded = make(kind, false), deferred = make(kind, true);
    Tensor a = window_read(*decoded, k, v, q), b = window_read(*deferred, k, v, q);
    EXPECT_LT(max_abs_diff(a, b), 2e-5) << kind;
    EXPECT_EQ(decoded->signature(), deferred->signature());
    // decode steps too
    for (int64_t t = 0; t < 3; ++t) {
      Tensor k1 = randn({2, 2, 1, 64}, 10 + t), v1 = randn({2, 2, 1, 64}, 20 + t), q1 = randn({2, 6, 1, 64}, 30 + t);
      Tensor x = decoded->append(k1, v1, AppendPhase::decode)->attend(q1, 0.125f);
      Tensor y = deferred->append(k1, v1, AppendPhase::decode)->attend(q1, 0.125f);
      EXPECT_LT(max_abs_diff(x, y), 2e-5) << kind << " step " << t;
    }
  }
}

TEST(QuantizedKVCache, SignaturesAndBytesPerToken) {
  EXPECT_EQ(make("bf16")->signature(), "kv:bf16");
  struct Case {
    const char* kind;
    int64_t group;
    const char* sig;
    int64_t bytes_per_head;  // keys + values for head_dim 64
  };
  const Case cases[] = {{"affine8", 64, "kv:affine:8:64", 2 * (64 + 4)},
                        {"affine4", 32, "kv:affine:4:32", 2 * (32 + 8)},
                        {"affine4", 64, "kv:affine:4:64", 2 * (32 + 4)},
                        {"turbo", 64, "kv:turboquant:k8v3", (64 + 8) + (24 + 4)},
                        {"turbo:k8v4", 64, "kv:turboquant:k8v4", (64 + 8) + (32 + 4)},
                        {"turbo:k8v2", 64, "kv:turboquant:k8v2", (64 + 8) + (16 + 4)},
                        {"turbo:k4v4", 64, "kv:turboquant:k4v4", (32 + 4) + (32 + 4)},
                        {"turbo:k3v3", 64, "kv:turboquant:k3v3", (24 + 4) + (24 + 4)}};
  for (const Case& c : cases) {
    auto cache = make(c.kind, false, c.group);
    Tensor k = randn({1, 2, 5, 64}, 1), v = randn({1, 2, 5, 64}, 2);
    cache->append(k, v, AppendPhase::window);
    EXPECT_EQ(cache->signature(), c.sig);
    auto& q = dynamic_cast<const TransitionKVCache&>(*cache).quantized();
    EXPECT_EQ(q.bytes_per_position(), 2 * c.bytes_per_head) << c.kind;
    KVCacheOptions o;
    o.kind = c.kind;
    o.group = c.group;
    EXPECT_EQ(kv_bytes_per_token(o, {}, 2, 64, 64, 4), 2 * c.bytes_per_head) << c.kind;
    EXPECT_GE(cache->bytes(), 5 * q.bytes_per_position());
  }
}

TEST(QuantizedKVCache, TrimDropsWholePositions) {
  for (const char* kind : {"affine8", "affine4", "turbo", "turbo:k8v4"}) {
    auto cache = make(kind);
    Tensor k = randn({1, 2, 40, 64}, 7), v = randn({1, 2, 40, 64}, 8);
    cache->append(k, v, AppendPhase::window);
    auto& q = dynamic_cast<const TransitionKVCache&>(*cache).quantized();
    Tensor keys = q.dequantized_keys(), values = q.dequantized_values();
    ASSERT_TRUE(cache->is_trimmable());
    EXPECT_EQ(cache->trim(15), 15);
    EXPECT_EQ(cache->offset(), 25);
    EXPECT_EQ(max_abs_diff(q.dequantized_keys(), keys.slice(2, 0, 25)), 0.0) << kind;
    EXPECT_EQ(max_abs_diff(q.dequantized_values(), values.slice(2, 0, 25)), 0.0) << kind;
    // appending after a trim continues at the trimmed offset; earlier positions are untouched
    Tensor k2 = randn({1, 2, 3, 64}, 9), v2 = randn({1, 2, 3, 64}, 10);
    cache->append(k2, v2, AppendPhase::window);
    EXPECT_EQ(cache->offset(), 28);
    EXPECT_EQ(max_abs_diff(q.dequantized_keys().slice(2, 0, 25), keys.slice(2, 0, 25)), 0.0) << kind;
    EXPECT_EQ(cache->trim(100), 28);
    EXPECT_EQ(cache->offset(), 0);
    EXPECT_THROW(cache->trim(-1), Error);
  }
}

TEST(QuantizedKVCache, DecodeAppendReadsItsOwnKeysUnquantized) {
  // After the prefix converts, a decode step attends to its own key/value exactly as given: with a
  // query that only matches the new key, the output is (nearly) the new value, unquantized.
  auto cache = make("turbo:k8v2");
  Tensor k = randn({1, 1, 8, 64}, 1, 0.01f), v = randn({1, 1, 8, 64}, 2);
  cache->append(k, v, AppendPhase::window);
  Tensor k1 = Tensor::zeros({1, 1, 1, 64}, Dtype::f32), v1 = randn({1, 1, 1, 64}, 3);
  k1.data<float>()[0] = 100.0f;
  Tensor q1 = Tensor::zeros({1, 1, 1, 64}, Dtype::f32);
  q1.data<float>()[0] = 1.0f;
  Tensor out = cache->append(k1, v1, AppendPhase::decode)->attend(q1, 1.0f);
  EXPECT_LT(max_abs_diff(out, v1), 1e-5);
}

TEST(KVCacheFactory, BoundaryAndWindowLayersStayPlain) {
  KVCacheOptions o;
  o.kind = "affine4";
  o.boundary = 2;
  for (int64_t i = 0; i < 8; ++i) {
    KVLayerInfo layer{.attention_index = i, .attention_layers = 8};
    EXPECT_EQ(kv_layer_is_quantized(o, layer), i >= 2 && i < 6) << i;
    auto c = make_kv_cache(o, layer);
    EXPECT_EQ(dynamic_cast<TransitionKVCache*>(c.get()) != nullptr, i >= 2 && i < 6) << i;
  }
  // affine kinds quantize sliding layers too (on their ring), the boundary still applies
  EXPECT_TRUE(kv_layer_is_quantized(o, {.attention_index = 3, .attention_layers = 8, .window = 128}));
  EXPECT_FALSE(kv_layer_is_quantized(o, {.attention_index = 1, .attention_layers = 8, .window = 128}));
}

TEST(KVCacheFactory, RejectsUnknownKindsAndBits) {
  auto msg = [](const std::string& kind) {
    KVCacheOptions o;
    o.kind = kind;
    try {
      o.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("turbo:k5v3").find("key bits 8, 4 or 3"), std::string::npos);
  EXPECT_NE(msg("turbo:k2v3").find("key bits 8, 4 or 3"), std::string::npos);
  EXPECT_EQ(msg("turbo:k4v3"), "no error");
  EXPECT_EQ(msg("turbo:k3v3"), "no error");
  EXPECT_NE(msg("turbo:k8v5").find("value bits"), std::string::npos);
  EXPECT_NE(msg("turbo:k8").find("turbo:k<K>v<V>"), std::string::npos);
  EXPECT_NE(msg("affine3").find("unsupported storage"), std::string::npos);
  EXPECT_EQ(msg("turbo:k8v8"), "no error");
  EXPECT_EQ(msg("affine8"), "no error");
  KVCacheOptions o;
  o.kind = "affine4";
  o.group = 48;
  EXPECT_THROW(o.validate(), Error);
  // head_dim not a multiple of the group / not a power of two is caught at the first append
  o.group = 128;
  auto c = make_kv_cache(o, {});
  EXPECT_THROW(c->append(randn({1, 1, 2, 64}, 1), randn({1, 1, 2, 64}, 2), AppendPhase::window), Error);
  auto t = make("turbo");
  EXPECT_THROW(t->append(randn({1, 1, 2, 96}, 1), randn({1, 1, 2, 96}, 2), AppendPhase::window), Error);
  // rotated keys need a power-of-two head_dim as values do (int8 keys take any multiple of 32)
  auto rk = make("turbo:k4v4");
  EXPECT_THROW(rk->append(randn({1, 1, 2, 96}, 1), randn({1, 1, 2, 64}, 2), AppendPhase::window), Error);
}

// The cache's CPU decode read (decoded or deferred) agrees with the fused-read op over the same packed
// rows: the op is what the CUDA storage runs, so this ties the two reads to one meaning.
TEST(QuantizedKVCache, DecodeReadMatchesKVDecodeAttentionOp) {
  const int64_t B = 2, Hkv = 2, Hq = 4, P = 40, D = 64;
  const float scale = 0.125f;
  std::vector<std::unique_ptr<QuantizedKVCache>> caches;
  caches.push_back(std::make_unique<AffineKVCache>(4, 32));
  caches.push_back(std::make_unique<TurboQuantKVCache>(8, 3, false));
  caches.push_back(std::make_unique<TurboQuantKVCache>(8, 3, true));
  for (auto& cache : caches) {
    Tensor k = randn({B, Hkv, P, D}, 61), v = randn({B, Hkv, P, D}, 62);
    cache->append(k, v, AppendPhase::window);
    Tensor kn = randn({B, Hkv, 1, D}, 63), vn = randn({B, Hkv, 1, D}, 64), q = randn({B, Hq, 1, D}, 65);
    Tensor got = cache->append(kn, vn, AppendPhase::decode)->attend(q, scale);
    const ops::KVRowCodec kc = cache->key_codec(), vc = cache->value_codec();
    Tensor kr = Tensor::empty({P, B, Hkv, kc.row_bytes()}, Dtype::u8), vr = Tensor::empty({P, B, Hkv, vc.row_bytes()}, Dtype::u8);
    ops::kv_encode(k, kc, kr);
    ops::kv_encode(v, vc, vr);
    Tensor want = ops::kv_decode_attention(q, kr, kc, vr, vc, kn, vn, scale);
    EXPECT_LT(max_abs_diff(got, want), 1e-5) << cache->signature();
  }
}

}  // namespace
}  // namespace tern
