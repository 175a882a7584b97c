// Qwen3.5 loading: a layer_types entry the hybrid cannot run is a clear error naming it; caches are a
// recurrent state per linear_attention layer and a KV cache per full_attention layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/models/registry.h"

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

}  // namespace
}  // namespace tern
