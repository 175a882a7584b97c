// Tier 1 parity (DESIGN.md §4): the CPU path against Hugging Face transformers' float32 references
// for the fixture checkpoints — full-forward logits, and greedy decoding through the KV cache up to
// the first step whose reference top-2 margin is below 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"
#include "tern/models/registry.h"

namespace tern {
namespace {

constexpr float kTol = 2e-4f;
constexpr float kMarginTol = 1e-3f;

std::string data_dir(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

Tensor ids_tensor(const std::vector<int32_t>& ids) { return Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())}); }

float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

float top2_margin(const float* row, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] > a) { b = a; a = row[i]; } else if (row[i] > b) { b = row[i]; }
  }
  return a - b;
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

class FixtureParity : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureParity, FullForwardLogits) {
  const std::string dir = data_dir(GetParam());
  auto model = load_model(dir);
  auto ref = io::SafetensorsFile::open(dir + "/reference.safetensors");
  auto meta = read_json(dir + "/reference.json");
  const int64_t V = model->vocab_size();
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    std::vector<int32_t> ids = meta["prompts"][p].get<std::vector<int32_t>>();
    CacheList caches = model->make_caches();
    Tensor logits = model->forward(ids_tensor(ids), caches, true).contiguous();
    Tensor want = ref->get("prompt" + std::to_string(p) + ".logits").contiguous();
    ASSERT_EQ(logits.numel(), want.numel());
    float d = max_abs_diff(logits.data<float>(), want.data<float>(), want.numel());
    EXPECT_LE(d, kTol) << GetParam() << " prompt " << p << " (" << ids.size() << " tokens), vocab " << V;
  }
}

TEST_P(FixtureParity, GreedyDecodeThroughCache) {
  const std::string dir = data_dir(GetParam());
  auto model = load_model(dir);
  auto ref = io::SafetensorsFile::open(dir + "/reference.safetensors");
  auto meta = read_json(dir + "/reference.json");
  const int64_t V = model->vocab_size();
  for (size_t p = 0; p < meta["prompts"].size(); ++p) {
    std::vector<int32_t> ids = meta["prompts"][p].get<std::vector<int32_t>>();
    std::vector<int32_t> greedy = meta["greedy"][p].get<std::vector<int32_t>>();
    Tensor want = ref->get("prompt" + std::to_string(p) + ".greedy_logits").contiguous();
    CacheList caches = model->make_caches();
    Tensor logits = model->forward(ids_tensor(ids), caches, false).contiguous();
    int compared = 0;
    for (size_t step = 0; step < greedy.size(); ++step) {
      const float* w = want.data<float>() + step * V;
      const float* got = logits.data<float>();
      EXPECT_LE(max_abs_diff(got, w, V), kTol) << GetParam() << " prompt " << p << " step " << step;
      ++compared;
      if (top2_margin(w, V) < kMarginTol) break;  // a near-tie may flip; stop comparing here
      EXPECT_EQ(argmax(got, V), greedy[step]) << GetParam() << " prompt " << p << " step " << step;
      logits = model->forward(ids_tensor({greedy[step]}), caches, false).contiguous();
    }
    EXPECT_GT(compared, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FixtureParity,
                         ::testing::Values("qwen3", "qwen3_tied", "llama", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "gemma4",
                                           "gemma4_moe"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ModelLoad, UnknownArchitectureIsAClearError) {
  std::string dir = ::testing::TempDir() + "/tern_unknown_arch";
  std::filesystem::create_directories(dir);
  auto cfg = read_json(data_dir("qwen3") + "/config.json");
  cfg["model_type"] = "mamba9";
  std::ofstream(dir + "/config.json") << cfg.dump();
  try {
    load_model(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'mamba9'"), std::string::npos) << e.what();
  }
}

TEST(ModelLoad, MissingDirectoryIsAClearError) {
  EXPECT_THROW(load_model("/nonexistent/tern-model"), Error);
}

}  // namespace
}  // namespace tern
