// Gemma 4 loading: a multimodal checkpoint's vision/audio tensors are skipped (the text model's
// logits unchanged), a missing text weight is an error naming it, KV-sharing layers own no cache, and
// per_layer_config keys are layer indices however transformers pads them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"
#include "tern/models/registry.h"

namespace tern {
namespace {

const std::string kFixture = std::string(TERN_TEST_DATA) + "/models/gemma4";

// A copy of the gemma4 fixture in dir with `drop` removed and `extra` added to its weights.
void write_variant(const std::string& dir, const std::string& drop, const std::vector<std::pair<std::string, Tensor>>& extra) {
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kFixture + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto src = io::SafetensorsFile::open(kFixture + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& e : src->tensors()) {
    if (e.name != drop) tensors.emplace_back(e.name, src->get(e.name));
  }
  for (const auto& e : extra) tensors.push_back(e);
  io::save_safetensors(dir + "/model.safetensors", tensors);
}

Tensor last_logits(const Model& model) {
  CacheList caches = model.make_caches();
  return model.forward(Tensor::from_vector(std::vector<int32_t>{2, 3, 4, 5}, {1, 4}), caches, false).contiguous();
}

TEST(Gemma4Load, MissingTextWeightNamesIt) {
  const std::string dir = ::testing::TempDir() + "/tern_gemma4_missing";
  const std::string name = "model.language_model.layers.3.self_attn.k_norm.weight";
  write_variant(dir, name, {});
  try {
    load_model(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Gemma4Load, VisionAndAudioTensorsAreSkipped) {
  const std::string dir = ::testing::TempDir() + "/tern_gemma4_towers";
  write_variant(dir, "",
                {{"model.vision_tower.encoder.layers.0.mlp.up_proj.weight", Tensor::zeros({4, 4}, Dtype::f32)},
                 {"model.audio_tower.layers.0.norm.weight", Tensor::zeros({4}, Dtype::f32)}});
  Tensor got = last_logits(*load_model(dir));
  Tensor want = last_logits(*load_model(kFixture));
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
}

TEST(Gemma4Load, SharingLayersOwnNoCacheAndSlidingLayersRing) {
  auto model = load_model(kFixture);
  CacheList caches = model->make_caches();
  ASSERT_EQ(caches.size(), 6u);  // layer types: s s f s | s f, the last two sharing K/V
  EXPECT_EQ(caches[0]->signature(), "kv:bf16:ring:16");
  EXPECT_EQ(caches[2]->signature(), "kv:bf16");
  EXPECT_TRUE(caches[4] == nullptr);
  EXPECT_TRUE(caches[5] == nullptr);
}

// The fixture with its per_layer_config keys renamed by `rename`.
std::string write_renamed_overrides(const std::string& name,
                                    const std::function<std::string(const std::string&)>& rename) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  write_variant(dir, "", {});
  std::ifstream in(kFixture + "/config.json");
  nlohmann::json c = nlohmann::json::parse(in);
  nlohmann::json& t = c.contains("text_config") ? c["text_config"] : c;
  nlohmann::json renamed = nlohmann::json::object();
  for (auto it = t["per_layer_config"].begin(); it != t["per_layer_config"].end(); ++it)
    renamed[rename(it.key())] = *it;
  t["per_layer_config"] = renamed;
  std::ofstream(dir + "/config.json") << c.dump(2);
  return dir;
}

// transformers writes "05" for layer 5 of a 42-layer model: the same layer as the fixture's "5".
TEST(Gemma4Load, ZeroPaddedPerLayerKeysNameTheSameLayers) {
  const std::string dir = write_renamed_overrides("tern_gemma4_padded", [](const std::string& k) { return "0" + k; });
  Tensor got = last_logits(*load_model(dir));
  Tensor want = last_logits(*load_model(kFixture));
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
}

TEST(Gemma4Load, PerLayerKeysThatAreNoLayerAreRefused) {
  for (const char* bad : {"x", "6", "-1", ""}) {
    const std::string dir =
        write_renamed_overrides("tern_gemma4_badkey", [&](const std::string& k) { return k == "5" ? bad : k; });
    try {
      load_model(dir);
      ADD_FAILURE() << "expected an error for key '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("per_layer_config keys"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tern
