// config.json and generation_config.json: every fixture, the demo model, v4 spellings, and errors.
#include "tern/io/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tern/io/generation_config.h"
#include "tests/io/io_test_util.h"

namespace tern::io {
namespace {

using testing_util::expect_error;
using testing_util::fresh_dir;
using testing_util::write_file;

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

// A temp model dir whose config.json is text.
std::string config_dir(const std::string& text) {
  std::string dir = fresh_dir("cfg");
  write_file(dir + "/config.json", text);
  return dir;
}

// A minimal flat config with extra keys spliced in (extra starts with a comma when non-empty).
std::string small_config(const std::string& extra = "") {
  return R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128)" +
         extra + "}";
}

TEST(ModelConfig, ParsesEveryFixture) {
  int n = 0;
  for (const auto& d : std::filesystem::directory_iterator(std::string(TERN_TEST_DATA) + "/models")) {
    if (!std::filesystem::exists(d.path() / "config.json")) continue;
    SCOPED_TRACE(d.path().string());
    ModelConfig c = load_model_config(d.path().string());
    ++n;
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_GT(c.n_layer, 0);
    EXPECT_EQ(static_cast<int64_t>(c.layer_types.size()), c.n_layer);
    EXPECT_EQ(c.rope.head_dim, c.head_dim);
    EXPECT_GT(c.rope.rotary_dim, 0);
    EXPECT_TRUE(c.text.is_object());
  }
  EXPECT_GE(n, 8);
}

TEST(ModelConfig, Qwen3AndLlamaValues) {
  ModelConfig q = load_model_config(fixture("qwen3"));
  EXPECT_EQ(q.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(q.model_type, "qwen3");
  EXPECT_EQ(q.text_model_type, "qwen3");
  EXPECT_EQ(q.hidden_size, 64);
  EXPECT_EQ(q.n_head, 4);
  EXPECT_EQ(q.n_head_kv, 2);
  EXPECT_EQ(q.head_dim, 32);
  EXPECT_EQ(q.n_layer, 3);
  EXPECT_EQ(q.intermediate_size, 128);
  EXPECT_DOUBLE_EQ(q.rms_norm_eps, 1e-6);
  EXPECT_EQ(q.rope.type, "default");
  EXPECT_DOUBLE_EQ(q.rope.theta, 1e6);
  EXPECT_EQ(q.rope.rotary_dim, 32);
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_EQ(q.sliding_window, 0);
  EXPECT_TRUE(q.eos_token_ids.empty());
  EXPECT_FALSE(q.bos_token_id.has_value());
  EXPECT_EQ(q.hidden_act, "silu");

  ModelConfig t = load_model_config(fixture("qwen3_tied"));
  EXPECT_TRUE(t.tie_word_embeddings);
  EXPECT_EQ(t.n_head, 3);
  EXPECT_EQ(t.n_head_kv, 1);
  EXPECT_EQ(t.head_dim, 16);
  EXPECT_DOUBLE_EQ(t.rope.theta, 10000.0);

  ModelConfig l = load_model_config(fixture("llama"));
  EXPECT_EQ(l.model_type, "llama");
  EXPECT_EQ(l.n_head_kv, 4);
  EXPECT_EQ(l.head_dim, 16);
  EXPECT_EQ(l.intermediate_size, 160);
  EXPECT_DOUBLE_EQ(l.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(l.rms_norm_eps, 1e-5);
  EXPECT_EQ(l.bos_token_id, 1);
  EXPECT_EQ(l.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_FALSE(l.pad_token_id.has_value());
  EXPECT_FALSE(l.tie_word_embeddings);

  ModelConfig demo = load_model_config(std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m");
  EXPECT_EQ(demo.vocab_size, 4096);
  EXPECT_EQ(demo.hidden_size, 384);
  EXPECT_EQ(demo.n_layer, 8);
  EXPECT_EQ(demo.n_head, 6);
  EXPECT_EQ(demo.n_head_kv, 2);
  EXPECT_EQ(demo.head_dim, 64);
  EXPECT_TRUE(demo.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(demo.rope.theta, 10000.0);
  EXPECT_EQ(demo.eos_token_ids, std::vector<int32_t>{0});
  EXPECT_EQ(demo.pad_token_id, 0);
}

TEST(ModelConfig, MultimodalLayoutAndPerLayerRope) {
  ModelConfig q = load_model_config(fixture("qwen3_5"));
  EXPECT_EQ(q.architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(q.model_type, "qwen3_5");
  EXPECT_EQ(q.text_model_type, "qwen3_5_text");
  EXPECT_EQ(q.n_layer, 4);
  EXPECT_EQ(q.layer_types, (std::vector<std::string>{"linear_attention", "linear_attention", "full_attention",
                                                     "linear_attention"}));
  EXPECT_EQ(q.head_dim, 32);
  EXPECT_EQ(q.rope.rotary_dim, 8);
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_EQ(q.text.at("linear_num_value_heads"), 4);
  EXPECT_TRUE(q.rope_by_layer_type.empty());

  ModelConfig g = load_model_config(fixture("gemma4"));
  EXPECT_EQ(g.model_type, "gemma4");
  EXPECT_EQ(g.text_model_type, "gemma4_text");
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_EQ(g.sliding_window, 16);
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(g.bos_token_id, 2);
  EXPECT_EQ(g.eos_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(g.pad_token_id, 0);
  ASSERT_EQ(g.rope_by_layer_type.size(), 2u);
  EXPECT_EQ(g.rope.type, "proportional");
  EXPECT_DOUBLE_EQ(g.rope.theta, 1e6);
  EXPECT_EQ(g.rope.rotary_dim, 8);
  const ops::RopeConfig& s = g.rope_for("sliding_attention");
  EXPECT_EQ(s.type, "default");
  EXPECT_DOUBLE_EQ(s.theta, 10000.0);
  EXPECT_EQ(s.rotary_dim, 32);
  EXPECT_EQ(g.rope_for("full_attention").type, "proportional");
  EXPECT_EQ(g.text.at("num_kv_shared_layers"), 2);

  ModelConfig m = load_model_config(fixture("qwen3_5_moe"));
  EXPECT_EQ(m.intermediate_size, 0);
  EXPECT_EQ(m.rope.rotary_dim, 8);
}

TEST(ModelConfig, AcceptsTransformersV4Spellings) {
  ModelConfig c = load_model_config(config_dir(small_config(
      R"(, "rope_theta": 500000.0, "max_position_embeddings": 131072, "tie_word_embeddings": true,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}, "eos_token_id": [128001, 128009])")));
  EXPECT_EQ(c.rope.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position, 8192);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128009}));

  ModelConfig y = load_model_config(config_dir(small_config(
      R"(, "partial_rotary_factor": 0.5, "max_position_embeddings": 4096,
         "rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": 16, "mscale": 0.7, "truncate": false})")));
  EXPECT_EQ(y.rope.type, "yarn");
  EXPECT_DOUBLE_EQ(y.rope.theta, 10000.0);
  EXPECT_DOUBLE_EQ(y.rope.factor, 4.0);
  EXPECT_DOUBLE_EQ(y.rope.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(y.rope.mscale, 0.7);
  EXPECT_FALSE(y.rope.truncate);
  EXPECT_EQ(y.rope.original_max_position, 4096);
  EXPECT_EQ(y.rope.rotary_dim, 8);

  ModelConfig m = load_model_config(config_dir(
      R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": null, "sliding_window": 4096,
          "rope_scaling": null, "bos_token_id": 1, "eos_token_id": 2})"));
  EXPECT_EQ(m.model_type, "mistral");
  EXPECT_EQ(m.architecture, "");
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.rope.type, "default");
  EXPECT_EQ(m.layer_types, std::vector<std::string>{"full_attention"});

  ModelConfig off = load_model_config(config_dir(small_config(R"(, "sliding_window": 128, "use_sliding_window": false)")));
  EXPECT_EQ(off.sliding_window, 0);
  ModelConfig other = load_model_config(config_dir(
      R"({"model_type": "phi3", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2})"));
  EXPECT_EQ(other.model_type, "phi3");
}

TEST(ModelConfig, ErrorsNameTheFileAndKey) {
  std::string dir = config_dir(R"({"vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 2})");
  std::string msg = expect_error([&] { load_model_config(dir); }, {dir + "/config.json"});
  EXPECT_NE(msg.find("expected key 'hidden_size'"), std::string::npos) << msg;

  dir = config_dir(R"({"text_config": {"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}})");
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "'text_config.num_hidden_layers'"});
  dir = config_dir(small_config().replace(small_config().find("\"hidden_size\": 64"), 17, "\"hidden_size\": \"64\""));
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "'hidden_size'", "integer", "\"64\""});
  dir = config_dir(small_config(R"(, "tie_word_embeddings": "yes")"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "'tie_word_embeddings'", "boolean"});
  dir = config_dir(small_config(R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0})"));
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "rope type", "'dynamic'"});
  dir = config_dir(small_config(R"(, "rope_parameters": {"rope_type": "wavelet", "rope_theta": 1.0})"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "'wavelet'"});
  dir = config_dir(small_config(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "'original_max_position_embeddings'"});
  dir = config_dir(small_config(R"(, "layer_types": ["full_attention"])"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "layer_types"});
  dir = config_dir(small_config(R"(, "num_key_value_heads": 3)"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "num_key_value_heads"});
  dir = config_dir(small_config(R"(, "eos_token_id": "</s>")"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "'eos_token_id'"});
  dir = config_dir("{\n  \"vocab_size\": 10,\n  \"hidden_size\": }");
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "valid JSON", "line 3, column"});
  dir = config_dir("[1]");
  expect_error([&] { load_model_config(dir); }, {"config.json", "object"});
  // Nesting deeper than any real config is refused while parsing (printing it in an error would recurse
  // once a level), however deep the file goes.
  dir = config_dir(std::string(200000, '[') + std::string(200000, ']'));
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "nested at most 64 deep"});
  dir = config_dir(small_config(R"(, "rope_scaling": )" + std::string(70, '[') + std::string(70, ']')));
  expect_error([&] { load_model_config(dir); }, {"config.json", "nested at most 64 deep"});
  dir = config_dir(small_config(R"(, "rms_norm_eps": -1e-6)"));
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "rms_norm_eps >= 0"});
  dir = config_dir(small_config(R"(, "rope_theta": 1e400)"));
  expect_error([&] { load_model_config(dir); }, {dir + "/config.json", "valid JSON", "overflow"});
  dir = config_dir(small_config(R"(, "eos_token_id": 18446744073709551615)"));
  expect_error([&] { load_model_config(dir); }, {"config.json", "'eos_token_id'"});

  std::string empty = fresh_dir("empty");
  expect_error([&] { load_model_config(empty); }, {empty + "/config.json"});
  expect_error([&] { load_model_config(empty + "/nope"); }, {empty + "/nope", "model directory"});
}

TEST(GenerationConfig, ReadsFixturesAndFallsBack) {
  GenerationConfig l = load_generation_config(fixture("llama"), load_model_config(fixture("llama")));
  EXPECT_EQ(l.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(l.bos_token_id, 1);
  EXPECT_FALSE(l.temperature.has_value());

  std::string demo_dir = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";
  GenerationConfig d = load_generation_config(demo_dir, load_model_config(demo_dir));
  EXPECT_EQ(d.eos_token_ids, std::vector<int32_t>{0});

  std::string dir = config_dir(small_config(R"(, "eos_token_id": 5, "bos_token_id": 4)"));
  ModelConfig c = load_model_config(dir);
  GenerationConfig none = load_generation_config(dir, c);
  EXPECT_EQ(none.eos_token_ids, std::vector<int32_t>{5});
  EXPECT_EQ(none.bos_token_id, 4);

  write_file(dir + "/generation_config.json",
             R"({"eos_token_id": [7, 8], "do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20,
                 "min_p": 0.0, "repetition_penalty": 1.1, "max_new_tokens": 256})");
  GenerationConfig g = load_generation_config(dir, c);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(g.bos_token_id, 4);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*g.top_p, 0.95);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(*g.min_p, 0.0);
  EXPECT_DOUBLE_EQ(*g.repetition_penalty, 1.1);
  EXPECT_EQ(g.max_new_tokens, 256);

  write_file(dir + "/generation_config.json", R"({"temperature": 0.7})");
  EXPECT_EQ(load_generation_config(dir, c).eos_token_ids, std::vector<int32_t>{5});

  write_file(dir + "/generation_config.json", R"({"top_k": "all"})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'top_k'", "integer"});
  write_file(dir + "/generation_config.json", R"({"eos_token_id": [1, "x"]})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'eos_token_id'"});
  write_file(dir + "/generation_config.json", "{");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "valid JSON"});
}

// What the CLI converts to floats and a 32-bit top_k must fit them: an out-of-range number is an error
// naming the key, not a silent infinity or a wrapped count; a negative top_k is left to the sampler,
// which rejects it only when it samples.
TEST(GenerationConfig, NumbersMustFitWhatTheSamplerTakes) {
  std::string dir = config_dir(small_config());
  ModelConfig c = load_model_config(dir);
  write_file(dir + "/generation_config.json", R"({"temperature": 1e39})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'temperature'", "float range"});
  write_file(dir + "/generation_config.json", R"({"repetition_penalty": -1e300})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'repetition_penalty'"});
  write_file(dir + "/generation_config.json", R"({"top_k": 4294967296})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'top_k'", "32 bits"});
  write_file(dir + "/generation_config.json", R"({"pad_token_id": 18446744073709551615})");
  expect_error([&] { load_generation_config(dir, c); }, {"generation_config.json", "'pad_token_id'"});
  write_file(dir + "/generation_config.json", R"({"top_k": -1, "top_p": 3.4e38, "do_sample": false})");
  GenerationConfig g = load_generation_config(dir, c);
  EXPECT_EQ(g.top_k, -1);
  EXPECT_DOUBLE_EQ(*g.top_p, 3.4e38);
  // The parser alone gives the same answers as the file reader.
  EXPECT_EQ(parse_generation_config(R"({"top_k": 5})", "x.json", c).top_k, 5);
  expect_error([&] { parse_generation_config(R"({"top_p": 1e39})", "x.json", c); }, {"x.json", "'top_p'"});
}

}  // namespace
}  // namespace tern::io
