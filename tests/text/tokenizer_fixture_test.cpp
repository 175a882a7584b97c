// Exactness against Hugging Face tokenizers: every line of tests/data/tokenizers/*/encode.jsonl
// (ids, ids_with_special, decoded), round trips, streaming decode, and the demo model's tokenizer.
#include <gtest/gtest.h>

#include <map>

#include "tern/text/tokenizer.h"
#include "tests/text/test_util.h"

namespace tern::text {
namespace {

using test::read_jsonl;

std::string show(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

const Tokenizer& cached(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::load(test::npm_dir(name))).first;
  return it->second;
}

void check_fixture(const std::string& name) {
  const Tokenizer& tok = cached(name);
  auto lines = read_jsonl(test::data_dir() + "/tokenizers/" + name + "/encode.jsonl");
  ASSERT_GT(lines.size(), 600u);
  int bad_ids = 0, bad_special = 0, bad_decoded = 0, bad_round = 0, bad_stream = 0;
  for (const auto& l : lines) {
    std::string text = l["text"];
    auto ids = l["ids"].get<std::vector<int32_t>>();
    auto ids_special = l["ids_with_special"].get<std::vector<int32_t>>();
    std::string decoded = l["decoded"];
    auto got = tok.encode(text);
    if (got != ids && bad_ids++ < 5)
      ADD_FAILURE() << name << " ids for " << nlohmann::json(text).dump() << "\n  want " << show(ids) << "\n  got  "
                    << show(got);
    auto got_special = tok.encode(text, true);
    if (got_special != ids_special && bad_special++ < 5)
      ADD_FAILURE() << name << " ids_with_special for " << nlohmann::json(text).dump() << "\n  want "
                    << show(ids_special) << "\n  got  " << show(got_special);
    std::string dec = tok.decode(ids);
    if (dec != decoded && bad_decoded++ < 5)
      ADD_FAILURE() << name << " decoded for " << show(ids) << "\n  want " << nlohmann::json(decoded).dump()
                    << "\n  got  " << nlohmann::json(dec).dump();
    // lossless where the reference decode reproduces the text
    if (decoded == text && tok.decode(tok.encode(text)) != text && bad_round++ < 5)
      ADD_FAILURE() << name << " round trip of " << nlohmann::json(text).dump();
    StreamDecoder sd(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    if (streamed != decoded && bad_stream++ < 5)
      ADD_FAILURE() << name << " streamed decode of " << show(ids) << "\n  want " << nlohmann::json(decoded).dump()
                    << "\n  got  " << nlohmann::json(streamed).dump();
  }
  EXPECT_EQ(bad_ids, 0);
  EXPECT_EQ(bad_special, 0);
  EXPECT_EQ(bad_decoded, 0);
  EXPECT_EQ(bad_round, 0);
  EXPECT_EQ(bad_stream, 0);
}

TEST(TokenizerFixture, Qwen3) {
  TERN_REQUIRE_NPM("qwen3");
  check_fixture("qwen3");
}

TEST(TokenizerFixture, Gemma3) {
  TERN_REQUIRE_NPM("gemma3");
  check_fixture("gemma3");
}

TEST(TokenizerFixture, Llama2) {
  TERN_REQUIRE_NPM("llama2");
  check_fixture("llama2");
}

TEST(TokenizerFixture, DemoModelReference) {
  std::string dir = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";
  Tokenizer tok = Tokenizer::load(dir);
  auto ref = nlohmann::json::parse(test::slurp(dir + "/reference.json"));
  ASSERT_FALSE(ref["continuations"].empty());
  for (const auto& c : ref["continuations"]) {
    std::string prompt = c["prompt"];
    auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(prompt), prompt_ids) << prompt;
    auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(greedy), c["greedy_text"].get<std::string>());
    EXPECT_EQ(tok.decode(tok.encode(c["greedy_text"].get<std::string>())), c["greedy_text"].get<std::string>());
  }
  EXPECT_EQ(tok.encode("The jury said"), (std::vector<int32_t>{330, 502, 1133, 591}));
  EXPECT_EQ(tok.eos_id(), 0);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_FALSE(tok.bos_id().has_value());
  EXPECT_EQ(tok.vocab_size(), 4096);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_EQ(tok.encode("<|im_start|>user\nhi<|im_end|>").front(), 1);
  ASSERT_NE(tok.config().chat_template(), nullptr);
}

TEST(TokenizerFixture, ConfigFields) {
  TERN_REQUIRE_NPM("llama2");
  const Tokenizer& llama = cached("llama2");
  EXPECT_EQ(llama.bos_id(), 1);
  EXPECT_EQ(llama.eos_id(), 2);
  EXPECT_FALSE(llama.pad_id().has_value());
  EXPECT_TRUE(llama.config().add_bos_token);
  EXPECT_EQ(llama.config().unk_token, "<unk>");
  EXPECT_EQ(llama.vocab_size(), 32000);
  EXPECT_EQ(llama.id_to_token(1), "<s>");
  EXPECT_EQ(llama.token_to_id("<0x0A>"), 13);
}

}  // namespace
}  // namespace tern::text
