// Model::cache_layout agrees with the caches the model makes and what they hold: Gemma 4's shared
// layers own none, its sliding layers ring at the window (the affine ring under affine kinds) and its
// full layers take TurboQuant's deferred read; Qwen3.5's recurrent layers hold exactly the fixed bytes
// the layout says after a forward. describe_model says the same as the loaded model without its weights.
#include <gtest/gtest.h>

#include "tern/base/error.h"
#include "tern/models/registry.h"
#include "tern/state/recurrent_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/ring_transition_kv_cache.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {
namespace {

const std::string kData = std::string(TERN_TEST_DATA) + "/models/";

TEST(CacheLayout, Gemma4LayoutMatchesItsCachesAndFullLayersReadDeferred) {
  auto model = load_model(kData + "gemma4");
  const std::vector<LayerCacheSpec> layout = model->cache_layout();
  KVCacheOptions turbo;
  turbo.kind = "turbo";
  KVCacheOptions affine;
  affine.kind = "affine4";
  affine.group = 32;
  CacheList t = model->make_caches(turbo), a = model->make_caches(affine);
  ASSERT_EQ(layout.size(), t.size());
  int full = 0, sliding = 0, shared = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    switch (layout[i].kind) {
      case LayerCacheSpec::shared:
        ++shared;
        EXPECT_EQ(t[i], nullptr);
        EXPECT_EQ(a[i], nullptr);
        break;
      case LayerCacheSpec::sliding: {
        ++sliding;
        auto* ring = dynamic_cast<RingKVCache*>(t[i].get());
        ASSERT_NE(ring, nullptr);
        EXPECT_EQ(ring->window(), layout[i].window);
        auto* q = dynamic_cast<RingTransitionKVCache*>(a[i].get());
        ASSERT_NE(q, nullptr);
        EXPECT_EQ(q->quantized().window(), layout[i].window);
        break;
      }
      case LayerCacheSpec::full: {
        ++full;
        auto* tr = dynamic_cast<TransitionKVCache*>(t[i].get());
        ASSERT_NE(tr, nullptr);
        auto* tq = dynamic_cast<const TurboQuantKVCache*>(&tr->quantized());
        ASSERT_NE(tq, nullptr);
        EXPECT_TRUE(tq->deferred_values());
        EXPECT_EQ(layout[i].head_dim, 512);  // the fixture's per_layer_config
        break;
      }
      default:
        ADD_FAILURE() << "unexpected kind";
    }
  }
  EXPECT_EQ(full, 1);
  EXPECT_EQ(sliding, 3);
  EXPECT_EQ(shared, 2);
}

TEST(CacheLayout, Qwen35RecurrentBytesAreWhatTheCacheHolds) {
  auto model = load_model(kData + "qwen3_5");
  const std::vector<LayerCacheSpec> layout = model->cache_layout();
  CacheList caches = model->make_caches();
  model->forward(Tensor::from_vector(std::vector<int32_t>{2, 3, 4, 5, 6}, {1, 5}), caches, false);
  int recurrent = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].kind != LayerCacheSpec::recurrent) {
      EXPECT_EQ(layout[i].kind, LayerCacheSpec::full);
      EXPECT_NE(dynamic_cast<KVCache*>(caches[i].get()), nullptr);
      continue;
    }
    ++recurrent;
    auto* rc = dynamic_cast<RecurrentCache*>(caches[i].get());
    ASSERT_NE(rc, nullptr);
    EXPECT_EQ(rc->bytes(), layout[i].fixed_bytes) << i;
  }
  EXPECT_GT(recurrent, 0);
}

// describe_model reads the config only; every fixture architecture's loaded model agrees with its layout,
// and only the mixtures of experts have routed experts (their counts are checked against the checkpoints'
// expert tensors in CliInfo.CountsTheParametersATokenUses).
TEST(CacheLayout, DescribeModelSaysWhatTheLoadedModelSays) {
  for (const char* name : {"qwen3", "qwen3_tied", "llama", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "gemma4", "gemma4_moe"}) {
    SCOPED_TRACE(name);
    const ModelShape shape = describe_model(kData + name);
    auto model = load_model(kData + name);
    EXPECT_EQ(shape.layout, model->cache_layout());
    const bool moe = std::string(name).find("moe") != std::string::npos;
    EXPECT_EQ(shape.experts.layers > 0, moe);
    const std::optional<ModelShape> from_config = describe_config(model->config());
    ASSERT_TRUE(from_config.has_value());
    EXPECT_EQ(from_config->layout, shape.layout);
    EXPECT_EQ(from_config->experts.idle_params(), shape.experts.idle_params());
  }
  EXPECT_THROW(describe_model(kData + "no_such_model"), Error);
  io::ModelConfig unknown = load_model(kData + "qwen3")->config();
  unknown.model_type = "no_such_architecture";
  unknown.text_model_type.clear();
  EXPECT_FALSE(describe_config(unknown).has_value());
}

}  // namespace
}  // namespace tern
