// WeightStore: single-file fixtures, a sharded index written here, prefixes, and the error cases.
#include "tern/io/weights.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/io/io_test_util.h"

namespace tern::io {
namespace {

using testing_util::expect_error;
using testing_util::fresh_dir;
using testing_util::write_file;

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

TEST(WeightStore, OpensSingleFileFixtures) {
  WeightStore w = WeightStore::open(fixture("qwen3"));
  EXPECT_TRUE(w.has("model.embed_tokens.weight"));
  EXPECT_FALSE(w.has("model.embed_tokens"));
  Tensor e = w.get("model.embed_tokens.weight", {512, 64});
  EXPECT_EQ(e.dtype(), Dtype::bf16);
  EXPECT_EQ(w.entry("lm_head.weight").shape, (Shape{512, 64}));
  std::vector<std::string> names = w.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  uint64_t sum = 0;
  for (const auto& n : names) sum += w.entry(n).nbytes();
  EXPECT_EQ(w.total_bytes(), sum);
  EXPECT_GT(sum, 512u * 64 * 2);
  EXPECT_NE(w.file_of("lm_head.weight").find("model.safetensors"), std::string::npos);
}

// A long load says how far it is: a line per progress interval as get() hands tensors out, counting
// their bytes (the interval is 0 here: a line per get; a fast load at the default 5 s prints none).
TEST(WeightStore, LongLoadsLogTheirProgress) {
  WeightStore w = WeightStore::open(fixture("qwen3"));
  const std::vector<std::string> names = w.names();
  ASSERT_GE(names.size(), 2u);
  testing::internal::CaptureStderr();
  w.get(names[0]);
  std::string quiet = testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("GB read"), std::string::npos) << quiet;
  w.set_progress_interval(0.0);
  testing::internal::CaptureStderr();
  w.get(names[1]);
  const std::string err = testing::internal::GetCapturedStderr();
  const double gb = (w.entry(names[0]).nbytes() + w.entry(names[1]).nbytes()) / 1e9;
  EXPECT_NE(err.find(fmt::format("[weights] {}: {:.2f} of {:.2f} GB read after", fixture("qwen3"), gb,
                                 w.total_bytes() / 1e9)),
            std::string::npos)
      << err;
}

TEST(WeightStore, FindsTextModelPrefixes) {
  const std::vector<std::string> prefixes = {"model.", "model.language_model.", "language_model.model."};
  EXPECT_EQ(WeightStore::open(fixture("qwen3")).find_prefix(prefixes, "embed_tokens.weight"), "model.");
  EXPECT_EQ(WeightStore::open(fixture("qwen3_5")).find_prefix(prefixes, "embed_tokens.weight"),
            "model.language_model.");
  EXPECT_EQ(WeightStore::open(fixture("gemma4")).find_prefix(prefixes, "embed_tokens.weight"),
            "model.language_model.");
  expect_error([&] { WeightStore::open(fixture("qwen3")).find_prefix({"x.", "y."}, "embed_tokens.weight"); },
               {"'x.embed_tokens.weight'", "'y.embed_tokens.weight'"});
}

TEST(WeightStore, ErrorsNameTheFileAndTensor) {
  WeightStore w = WeightStore::open(fixture("llama"));
  expect_error([&] { w.get("model.nope.weight"); }, {fixture("llama"), "missing tensor 'model.nope.weight'"});
  std::string msg = expect_error([&] { w.get("model.embed_tokens.weight", {64, 512}); },
                                 {"model.safetensors", "tensor 'model.embed_tokens.weight'"});
  EXPECT_NE(msg.find("expected shape [64, 512], got [512, 64]"), std::string::npos) << msg;

  std::string dir = fresh_dir("missing");
  expect_error([&] { WeightStore::open(dir + "/absent"); }, {dir + "/absent", "model directory"});
  expect_error([&] { WeightStore::open(dir); }, {dir, "model.safetensors"});
  write_file(dir + "/model.safetensors", "short");
  expect_error([&] { WeightStore::open(dir); }, {"model.safetensors", "8 bytes"});
}

class ShardedStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("sharded");
    a_ = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    b_ = Tensor::from_vector<int32_t>({7, 8}, {2});
    c_ = Tensor::from_vector<float>({9}, {1});
    save_safetensors(dir_ + "/model-00001-of-00002.safetensors", {{"model.a", a_}, {"model.b", b_}});
    save_safetensors(dir_ + "/model-00002-of-00002.safetensors", {{"model.c", c_}, {"model.unlisted", c_}});
  }
  void write_index(const std::string& weight_map) {
    write_file(dir_ + "/model.safetensors.index.json",
               R"({"metadata": {"total_size": 36}, "weight_map": )" + weight_map + "}");
  }
  std::string dir_;
  Tensor a_, b_, c_;
};

TEST_F(ShardedStore, ReadsEveryShard) {
  write_index(R"({"model.a": "model-00001-of-00002.safetensors", "model.b": "model-00001-of-00002.safetensors",
                  "model.c": "model-00002-of-00002.safetensors"})");
  WeightStore w = WeightStore::open(dir_);
  EXPECT_EQ(w.names(), (std::vector<std::string>{"model.a", "model.b", "model.c"}));
  EXPECT_EQ(w.get("model.a", {2, 3}).to_f32_vector(), a_.to_f32_vector());
  EXPECT_EQ(w.get("model.b").data<int32_t>()[1], 8);
  EXPECT_EQ(w.get("model.c").to_f32_vector(), std::vector<float>{9});
  EXPECT_FALSE(w.has("model.unlisted"));
  EXPECT_EQ(w.total_bytes(), 24u + 8u + 4u);
  EXPECT_NE(w.file_of("model.c").find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST_F(ShardedStore, ReportsIndexProblems) {
  write_index(R"({"model.a": "model-00001-of-00002.safetensors", "model.ghost": "model-00002-of-00002.safetensors"})");
  WeightStore w = WeightStore::open(dir_);
  EXPECT_TRUE(w.has("model.ghost"));
  expect_error([&] { w.get("model.ghost"); },
               {"model-00002-of-00002.safetensors", "missing tensor 'model.ghost'", "index.json"});

  write_index(R"({"model.a": "model-00003-of-00003.safetensors"})");
  expect_error([&] { WeightStore::open(dir_); },
               {"model.safetensors.index.json", "model-00003-of-00003.safetensors", "'model.a'"});
  write_index(R"({"model.a": "../model-00001-of-00002.safetensors"})");
  expect_error([&] { WeightStore::open(dir_); }, {"model.safetensors.index.json", "'model.a'"});
  write_index(R"({"model.a": 3})");
  expect_error([&] { WeightStore::open(dir_); }, {"model.safetensors.index.json", "'model.a'"});
  write_index(R"([1, 2])");
  expect_error([&] { WeightStore::open(dir_); }, {"model.safetensors.index.json", "weight_map"});
  write_file(dir_ + "/model.safetensors.index.json", "{\"weight_map\": {");
  expect_error([&] { WeightStore::open(dir_); }, {"model.safetensors.index.json", "valid JSON", "line 1"});
}

}  // namespace
}  // namespace tern::io
