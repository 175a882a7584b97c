// Models over random weights (random_weights.json, no checkpoint): every fixture architecture loads and
// runs a forward with finite, non-degenerate logits that repeat exactly across loads; a MoE spec with
// the fused expert names transformers 5 keeps in memory loads too.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/io/random_weights.h"
#include "tern/io/safetensors.h"
#include "tern/models/registry.h"

namespace tern {
namespace {

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

// A directory holding fixture model's config.json and a random_weights.json of its tensors.
std::string random_dir(const std::string& model, const nlohmann::json& spec) {
  const std::string dir = ::testing::TempDir() + "/tern_random_" + model + "_" + std::to_string(spec.size());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture(model) + "/config.json", dir + "/config.json");
  std::ofstream(dir + "/" + io::kRandomWeightsName) << spec.dump();
  return dir;
}

nlohmann::json spec_of(const std::string& model) {
  nlohmann::json spec = nlohmann::json::array();
  const auto file = io::SafetensorsFile::open(fixture(model) + "/model.safetensors");
  for (const auto& e : file->tensors())
    spec.push_back({{"name", e.name}, {"shape", e.shape}, {"dtype", io::safetensors_dtype_name(e.dtype)}});
  return spec;
}

std::vector<float> last_logits(const std::string& dir) {
  auto model = load_model(dir);
  CacheList caches = model->make_caches();
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{2, 3, 4, 5, 6, 7}, {1, 6});
  Tensor logits = model->forward(ids, caches, false).contiguous();
  return std::vector<float>(logits.data<float>(), logits.data<float>() + logits.numel());
}

void expect_sane_and_repeatable(const std::string& dir) {
  const std::vector<float> a = last_logits(dir);
  ASSERT_FALSE(a.empty());
  float lo = a[0], hi = a[0];
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v)) << dir;
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-4f) << dir << ": logits should vary over the vocabulary";
  EXPECT_EQ(a, last_logits(dir)) << dir << ": two loads must give the same logits";
}

TEST(RandomWeightsLoad, EveryFixtureArchitectureRuns) {
  for (const std::string model : {"qwen3", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "gemma4", "llama"}) {
    SCOPED_TRACE(model);
    expect_sane_and_repeatable(random_dir(model, spec_of(model)));
  }
}

TEST(RandomWeightsLoad, FusedExpertNamesLoad) {
  // qwen3_moe fixture: 8 experts, hidden 64, moe_intermediate_size 32; layer 1 is dense.
  nlohmann::json spec = nlohmann::json::array();
  for (const auto& e : spec_of("qwen3_moe")) {
    if (e["name"].get<std::string>().find(".mlp.experts.") == std::string::npos) spec.push_back(e);
  }
  for (int layer : {0, 2}) {
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    spec.push_back({{"name", p + "gate_up_proj"}, {"shape", {8, 64, 64}}, {"dtype", "BF16"}});
    spec.push_back({{"name", p + "down_proj"}, {"shape", {8, 64, 32}}, {"dtype", "BF16"}});
  }
  expect_sane_and_repeatable(random_dir("qwen3_moe", spec));
}

}  // namespace
}  // namespace tern
