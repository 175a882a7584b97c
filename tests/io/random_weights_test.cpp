// RandomWeights through WeightStore: a directory with random_weights.json and no safetensors lists the
// same tensors as the checkpoint it describes, with deterministic, sanely scaled values.
#include "tern/io/random_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tern/base/parallel.h"
#include "tern/io/weights.h"
#include "tests/io/io_test_util.h"

namespace tern::io {
namespace {

using testing_util::expect_error;
using testing_util::fresh_dir;
using testing_util::write_file;

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

// random_weights.json listing every tensor of a fixture checkpoint.
std::string spec_of(const std::string& model) {
  nlohmann::json spec = nlohmann::json::array();
  const auto file = SafetensorsFile::open(fixture(model) + "/model.safetensors");
  for (const auto& e : file->tensors())
    spec.push_back({{"name", e.name}, {"shape", e.shape}, {"dtype", safetensors_dtype_name(e.dtype)}});
  return spec.dump();
}

std::string random_dir(const std::string& model) {
  std::string dir = fresh_dir(model);
  write_file(dir + "/" + kRandomWeightsName, spec_of(model));
  return dir;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.data<bf16>()[i];
  return out;
}

TEST(RandomWeights, ListsTheCheckpointTensors) {
  const WeightStore real = WeightStore::open(fixture("qwen3"));
  const WeightStore w = WeightStore::open(random_dir("qwen3"));
  EXPECT_TRUE(w.is_random());
  EXPECT_FALSE(real.is_random());
  EXPECT_EQ(w.names(), real.names());
  for (const auto& n : real.names()) {
    EXPECT_EQ(w.entry(n).shape, real.entry(n).shape) << n;
    EXPECT_EQ(w.entry(n).dtype, real.entry(n).dtype) << n;
    const Tensor t = w.get(n);
    EXPECT_EQ(t.shape(), real.entry(n).shape) << n;
    EXPECT_EQ(t.dtype(), Dtype::bf16) << n;
  }
  EXPECT_EQ(w.total_bytes(), real.total_bytes());
  EXPECT_NE(w.file_of("lm_head.weight").find(kRandomWeightsName), std::string::npos);
  expect_error([&] { w.get("lm_head.weight", Shape{64, 512}); }, {"lm_head.weight", "expected shape [64, 512]"});
  expect_error([&] { w.get("absent.weight"); }, {"missing tensor 'absent.weight'"});
}

TEST(RandomWeights, ValuesAreDeterministicAndSanelyScaled) {
  const std::string dir = random_dir("qwen3");
  const WeightStore a = WeightStore::open(dir), b = WeightStore::open(dir);
  const int threads = num_threads();
  for (const auto& n : a.names()) {
    const std::vector<float> va = values(a.get(n));
    set_num_threads(1);
    const std::vector<float> vb = values(b.get(n));
    set_num_threads(threads);
    ASSERT_EQ(va, vb) << n << ": two loads (and thread counts) must agree";
  }
  for (const auto& v : values(a.get("model.norm.weight"))) ASSERT_EQ(v, 1.0f);
  for (const auto& v : values(a.get("model.layers.0.self_attn.q_norm.weight"))) ASSERT_EQ(v, 1.0f);
  const std::vector<float> emb = values(a.get("model.embed_tokens.weight"));  // [512, 64]
  double sum = 0, sq = 0;
  for (float v : emb) sum += v, sq += static_cast<double>(v) * v;
  const double mean = sum / emb.size(), sd = std::sqrt(sq / emb.size() - mean * mean);
  EXPECT_LT(std::abs(mean), 1e-3);
  EXPECT_NEAR(sd, 0.02, 1e-3);
  EXPECT_NE(values(a.get("model.layers.0.self_attn.q_proj.weight")), values(a.get("model.layers.1.self_attn.q_proj.weight")));
}

TEST(RandomWeights, DefaultFillsByName) {
  EXPECT_EQ(default_random_fill("model.layers.0.input_layernorm.weight").std, 0.0f);
  EXPECT_EQ(default_random_fill("model.layers.0.input_layernorm.weight").mean, 1.0f);
  EXPECT_EQ(default_random_fill("model.language_model.layers.0.layer_scalar").mean, 1.0f);
  EXPECT_EQ(default_random_fill("model.language_model.layers.0.linear_attn.A_log").mean, 0.0f);
  EXPECT_EQ(default_random_fill("model.language_model.layers.0.linear_attn.A_log").std, 0.0f);
  EXPECT_EQ(default_random_fill("model.language_model.layers.0.linear_attn.dt_bias").mean, 1.0f);
  EXPECT_EQ(default_random_fill("model.layers.0.self_attn.q_proj.bias").std, 0.0f);
  EXPECT_EQ(default_random_fill("model.layers.0.mlp.experts.gate_up_proj").std, 0.02f);
}

TEST(RandomWeights, PerTensorOverridesAndDtypes) {
  const std::string dir = fresh_dir("overrides");
  write_file(dir + "/" + kRandomWeightsName,
             R"([{"name": "c", "shape": [3, 2], "dtype": "F32", "mean": 0.5, "std": 0},
                 {"name": "h", "shape": [4], "dtype": "F16"},
                 {"name": "s", "shape": [], "dtype": "BF16"}])");
  const WeightStore w = WeightStore::open(dir);
  const Tensor c = w.get("c");
  ASSERT_EQ(c.dtype(), Dtype::f32);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c.data<float>()[i], 0.5f);
  EXPECT_EQ(w.get("h").dtype(), Dtype::f16);
  EXPECT_EQ(w.get("s").numel(), 1);
  EXPECT_EQ(w.total_bytes(), 24u + 8u + 2u);
}

TEST(RandomWeights, CheckpointWinsOverTheSpec) {
  const std::string dir = random_dir("qwen3");
  std::filesystem::copy_file(fixture("qwen3") + "/model.safetensors", dir + "/model.safetensors");
  EXPECT_FALSE(WeightStore::open(dir).is_random());
}

TEST(RandomWeights, MalformedSpecsAreErrors) {
  const std::string dir = fresh_dir("bad");
  const std::string path = dir + "/" + kRandomWeightsName;
  write_file(path, R"({"name": "a"})");
  expect_error([&] { WeightStore::open(dir); }, {path, "list"});
  write_file(path, R"([{"name": "a", "shape": [2], "dtype": "I8"}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "I8"});
  write_file(path, R"([{"name": "a", "shape": [-1]}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "non-negative"});
  write_file(path, R"([{"name": "a", "shape": [2]}, {"name": "a", "shape": [3]}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "twice"});
  write_file(path, R"([])");
  expect_error([&] { WeightStore::open(dir); }, {path, "at least one"});
  // Sizes past 64 bits are errors, not wrapped offsets: one shape, and tensors that only overflow together.
  write_file(path, R"([{"name": "a", "shape": [4294967296, 4294967296]}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "64 bits"});
  write_file(path, R"([{"name": "a", "shape": [18446744073709551615]}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "non-negative"});
  write_file(path, R"([{"name": "a", "shape": [2305843009213693951], "dtype": "F32"},
                       {"name": "b", "shape": [2305843009213693951], "dtype": "F32"},
                       {"name": "c", "shape": [2305843009213693951], "dtype": "F32"}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "total size", "64 bits"});
  write_file(path, R"([{"name": "a", "shape": [2], "mean": 1e39}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a.mean'", "float range"});
  write_file(path, R"([{"name": "a", "shape": [2], "std": -0.5}])");
  expect_error([&] { WeightStore::open(dir); }, {path, "'a'", "std >= 0"});
  // The text parser is the file's: the same list, the same layout.
  const auto rw = RandomWeights::parse(R"([{"name": "b", "shape": [3]}, {"name": "a", "shape": [2, 2], "dtype": "F32"}])",
                                       "spec.json");
  ASSERT_EQ(rw->tensors().size(), 2u);
  EXPECT_EQ(rw->tensors()[0].name, "a");
  EXPECT_EQ(rw->tensors()[0].end, 16u);
  EXPECT_EQ(rw->tensors()[1].begin, 16u);
  EXPECT_EQ(rw->total_bytes(), 22u);
}

}  // namespace
}  // namespace tern::io
