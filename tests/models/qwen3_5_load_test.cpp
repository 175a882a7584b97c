// Qwen3.5 loading: a layer_types entry the hybrid cannot run is a clear error naming it; caches are a
// recurrent state per linear_attention layer and a KV cache per full_attention layer; a text-only config
// (qwen3_5_text) loads the same model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"
#include "tern/models/registry.h"
#include "tern/state/recurrent_cache.h"

namespace tern {
namespace {

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(Qwen35Load, UnsupportedLayerTypeIsAClearError) {
  for (const std::string name : {"qwen3_5", "qwen3_5_moe"}) {
    const std::string dir = ::testing::TempDir() + "/tern_" + name + "_bad_layer_type";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(fixture(name) + "/model.safetensors", dir + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    nlohmann::json cfg = read_json(fixture(name) + "/config.json");
    nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
    text["layer_types"][1] = "sliding_attention";
    std::ofstream(dir + "/config.json") << cfg.dump();
    try {
      load_model(dir);
      FAIL() << name << ": expected an error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("unsupported layer type 'sliding_attention' at layer_types[1]"), std::string::npos) << msg;
    }
  }
}

TEST(Qwen35Load, CachesFollowLayerTypes) {
  auto model = load_model(fixture("qwen3_5"));
  CacheList caches = model->make_caches();
  ASSERT_EQ(caches.size(), 4u);
  const std::vector<std::string> types = model->config().layer_types;
  for (size_t i = 0; i < caches.size(); ++i) {
    const bool linear = types[i] == "linear_attention";
    EXPECT_EQ(caches[i]->signature().rfind(linear ? "recurrent:" : "kv:", 0), 0u) << i << " " << caches[i]->signature();
    EXPECT_EQ(caches[i]->is_trimmable(), !linear) << i;
  }
}

TEST(Qwen35Load, VisionTowerAndMtpAreSkipped) {
  const std::string dir = ::testing::TempDir() + "/tern_qwen3_5_multimodal_extras";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture("qwen3_5") + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto src = io::SafetensorsFile::open(fixture("qwen3_5") + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& e : src->tensors()) tensors.emplace_back(e.name, src->get(e.name));
  tensors.emplace_back("model.visual.patch_embed.proj.weight", Tensor::zeros({4, 4}, Dtype::f32));
  tensors.emplace_back("model.visual.merger.linear_fc1.weight", Tensor::zeros({4, 4}, Dtype::f32));
  tensors.emplace_back("mtp.fc.weight", Tensor::zeros({4, 4}, Dtype::f32));
  io::save_safetensors(dir + "/model.safetensors", tensors);

  ::testing::internal::CaptureStderr();
  auto model = load_model(dir);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("skipped model.visual.* (2 tensors), mtp.* (1 tensors)"), std::string::npos) << log;
  auto plain = load_model(fixture("qwen3_5"));
  EXPECT_EQ(model->n_params(), plain->n_params());

  Tensor ids = Tensor::from_vector(std::vector<int32_t>{5, 9, 2}, {1, 3});
  CacheList a = model->make_caches(), b = plain->make_caches();
  EXPECT_EQ(model->forward(ids, a, true).to_f32_vector(), plain->forward(ids, b, true).to_f32_vector());
}

// A text-only checkpoint (config.json the text_config, model_type qwen3_5_text) of the same weights
// loads as the same model: the form the CUDA parity test builds for qwen3_5_text.
TEST(Qwen35Load, TextOnlyConfigLoadsTheSameModel) {
  const std::string dir = ::testing::TempDir() + "/tern_qwen3_5_text_only";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture("qwen3_5") + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  nlohmann::json text = read_json(fixture("qwen3_5") + "/config.json")["text_config"];
  ASSERT_EQ(text["model_type"], "qwen3_5_text");
  std::ofstream(dir + "/config.json") << text.dump();
  auto model = load_model(dir), plain = load_model(fixture("qwen3_5"));
  EXPECT_EQ(model->config().model_type, "qwen3_5_text");
  EXPECT_EQ(model->n_params(), plain->n_params());
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{7, 1, 4, 4}, {1, 4});
  CacheList a = model->make_caches(), b = plain->make_caches();
  EXPECT_EQ(model->forward(ids, a, true).to_f32_vector(), plain->forward(ids, b, true).to_f32_vector());
}

// A speculative round on the hybrid: recurrent layers roll back by snapshot/restore, attention layers by
// trim; replaying the accepted token then gives the logits of a run that never saw the draft.
TEST(Qwen35Load, SpeculativeRollbackByReplay) {
  for (const std::string name : {"qwen3_5", "qwen3_5_moe"}) {
    auto model = load_model(fixture(name));
    auto ids = [](std::vector<int32_t> v) { return Tensor::from_vector(v, {1, static_cast<int64_t>(v.size())}); };
    CacheList spec = model->make_caches(), plain = model->make_caches();
    model->forward(ids({3, 14, 15, 92, 65}), spec, false);
    model->forward(ids({3, 14, 15, 92, 65}), plain, false);

    std::vector<RecurrentCache::Snapshot> snaps(spec.size());
    for (size_t i = 0; i < spec.size(); ++i)
      if (auto* rc = dynamic_cast<RecurrentCache*>(spec[i].get())) snaps[i] = rc->snapshot();
    model->forward(ids({35, 89, 79}), spec, true);  // the draft, rejected
    for (size_t i = 0; i < spec.size(); ++i) {
      if (auto* rc = dynamic_cast<RecurrentCache*>(spec[i].get())) {
        rc->restore(snaps[i]);
      } else {
        ASSERT_TRUE(spec[i]->is_trimmable());
        EXPECT_EQ(spec[i]->trim(3), 3);
      }
      EXPECT_EQ(spec[i]->offset(), 5) << name << " layer " << i;
    }
    std::vector<float> replay = model->forward(ids({26}), spec, false).to_f32_vector();
    std::vector<float> want = model->forward(ids({26}), plain, false).to_f32_vector();
    EXPECT_EQ(replay, want) << name;
  }
}

}  // namespace
}  // namespace tern
