// BPE model options (unk / fuse_unk, byte_fallback, ignore_merges, subword prefix, both merge
// spellings), added-token matching rules, post-processors and tokenizer.json error messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tern/base/error.h"
#include "tern/text/tokenizer.h"

namespace tern::text {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A tokenizer over vocab (token -> id) and merges with the given pipeline parts.
json tiny(json vocab, json merges, json model_extra = json::object()) {
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  model.update(model_extra);
  return {{"version", "1.0"}, {"added_tokens", json::array()}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr},
          {"post_processor", nullptr}, {"decoder", nullptr}, {"model", model}};
}

Tokenizer make(const json& j) { return Tokenizer::from_json(j.dump()); }

TEST(Bpe, MergesBothSpellingsAndRanks) {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  // "b c" ranks before "a b": abc -> a + bc, and no merge (a, bc) exists
  EXPECT_EQ(make(tiny(vocab, {"b c", "a b"})).encode("abc"), (Ids{0, 4}));
  EXPECT_EQ(make(tiny(vocab, json::array({{"a", "b"}, {"b", "c"}, {"ab", "c"}}))).encode("abc"), (Ids{5}));
  EXPECT_EQ(make(tiny(vocab, json::array({{"a", "b"}}))).encode("abcabc"), (Ids{3, 2, 3, 2}));
}

TEST(Bpe, IgnoreMerges) {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}};
  EXPECT_EQ(make(tiny(vocab, {"a b"})).encode("abc"), (Ids{3, 2}));
  EXPECT_EQ(make(tiny(vocab, {"a b"}, {{"ignore_merges", true}})).encode("abc"), (Ids{4}));
}

TEST(Bpe, UnknownFuseAndByteFallback) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"<0x78>", 3}};
  EXPECT_EQ(make(tiny(vocab, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}})).encode("ayzb"),
            (Ids{1, 0, 2}));
  EXPECT_EQ(make(tiny(vocab, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", false}})).encode("ayzb"),
            (Ids{1, 0, 0, 2}));
  // byte fallback covers 'x' (every byte of the character must exist), not 'y'
  EXPECT_EQ(make(tiny(vocab, json::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}})).encode("xy"),
            (Ids{3, 0}));
  // no unk token: unknown characters vanish, as in tokenizers
  EXPECT_EQ(make(tiny(vocab, json::array())).encode("ayb"), (Ids{1, 2}));
}

TEST(Bpe, MissingMergesMeansNone) {
  json t = tiny({{"a", 0}, {"b", 1}, {"ab", 2}}, json::array());
  t["model"].erase("merges");
  EXPECT_EQ(make(t).encode("ab"), (Ids{0, 1}));
}

TEST(Bpe, ContinuingSubwordPrefix) {
  json vocab = {{"a", 0}, {"##b", 1}, {"ab", 2}, {"b", 3}};
  auto tok = make(tiny(vocab, {"a ##b"}, {{"continuing_subword_prefix", "##"}}));
  EXPECT_EQ(tok.encode("ab"), (Ids{2}));
  EXPECT_EQ(tok.encode("b"), (Ids{3}));
}

TEST(Bpe, LongWordIsFast) {
  json vocab = {{"a", 0}, {"aa", 1}, {"aaaa", 2}};
  auto tok = make(tiny(vocab, {"a a", "aa aa"}));
  std::string word(200000, 'a');
  auto ids = tok.encode(word);
  ASSERT_EQ(ids.size(), 50000u);
  EXPECT_EQ(ids.front(), 2);
}

json with_added(json t, json added) {
  t["added_tokens"] = added;
  return t;
}

json added_token(int id, const std::string& content, bool special, json extra = json::object()) {
  json a = {{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", false}, {"special", special}};
  a.update(extra);
  return a;
}

json char_vocab() {
  json v;
  int id = 0;
  for (char c : std::string(" abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ<>")) v[std::string(1, c)] = id++;
  return v;
}

TEST(AddedTokens, StripAndSingleWord) {
  json base = tiny(char_vocab(), json::array());
  auto tok = make(with_added(base, {added_token(100, "<m>", true, {{"lstrip", true}, {"rstrip", true}})}));
  // the spaces around <m> are absorbed into it
  EXPECT_EQ(tok.encode("a <m> b"), (Ids{1, 100, 2}));
  auto sw = make(with_added(base, {added_token(100, "ab", false, {{"single_word", true}})}));
  EXPECT_EQ(sw.encode("ab cab abc ab"), (Ids{100, 0, 3, 1, 2, 0, 1, 2, 3, 0, 100}));
  auto plain = make(with_added(base, {added_token(100, "ab", false), added_token(101, "abc", false)}));
  EXPECT_EQ(plain.encode("xabcab"), (Ids{24, 101, 100}));  // leftmost-longest
}

TEST(AddedTokens, NormalizedMatchAndDecode) {
  json base = tiny(char_vocab(), json::array());
  base["normalizer"] = {{"type", "Lowercase"}};
  auto tok = make(with_added(base, {added_token(100, "hi", false, {{"normalized", true}}),
                                    added_token(101, "<S>", true)}));
  EXPECT_EQ(tok.encode("HI <S>"), (Ids{100, 0, 101}));  // <S> matches the raw text before lowercasing
  EXPECT_EQ(tok.decode(Ids{100, 0, 101}), "hi   <S>");  // no decoder: tokens joined by spaces
  EXPECT_EQ(tok.decode(Ids{100, 101}, true), "hi");
  EXPECT_TRUE(tok.is_special(101));
  EXPECT_FALSE(tok.is_special(100));
  EXPECT_EQ(tok.token_to_id("<S>"), 101);
  EXPECT_EQ(tok.vocab_size(), 102);
  EXPECT_EQ(tok.id_to_token(5000), "");
}

TEST(PostProcessors, TemplateRobertaSequence) {
  json base = tiny(char_vocab(), json::array());
  base["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {7}}, {"tokens", {"<s>"}}}},
                          {"</s>", {{"id", "</s>"}, {"ids", {8, 9}}, {"tokens", {"</", "s>"}}}}}}};
  auto tok = make(base);
  EXPECT_EQ(tok.encode("ab", true), (Ids{7, 1, 2, 8, 9}));
  EXPECT_EQ(tok.encode("ab", false), (Ids{1, 2}));
  base["post_processor"] = {{"type", "Sequence"},
                            {"processors",
                             {{{"type", "ByteLevel"}, {"trim_offsets", false}},
                              {{"type", "RobertaProcessing"}, {"cls", {"<s>", 3}}, {"sep", {"</s>", 4}}}}}};
  EXPECT_EQ(make(base).encode("a", true), (Ids{3, 1, 4}));
}

// The error from_json throws for text, or "no error".
std::string message(const std::string& text) {
  try {
    Tokenizer::from_json(text);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

TEST(TokenizerJson, ErrorsNameTheField) {
  EXPECT_NE(message("{").find("tokenizer.json: expected valid JSON"), std::string::npos);
  json t = tiny(char_vocab(), {"a q"});
  t["model"]["merges"] = {"a zz"};
  EXPECT_NE(message(t.dump()).find("model.merges[0]"), std::string::npos) << message(t.dump());
  // Merges resolve in two halves at once; the error still names the first bad merge.
  json merges = json::array();
  for (int i = 0; i < 10; ++i) merges.push_back("a q");
  merges.push_back("a zz");
  for (int i = 0; i < 3; ++i) merges.push_back("a q");
  merges.push_back("yy a");
  t["model"]["merges"] = merges;
  t["model"]["vocab"]["aq"] = 200;
  EXPECT_NE(message(t.dump()).find("in the vocab at model.merges[10], got 'zz'"),
            std::string::npos)
      << message(t.dump());
  merges[1] = "q zz";
  t["model"]["merges"] = merges;
  EXPECT_NE(message(t.dump()).find("model.merges[1]"), std::string::npos) << message(t.dump());
  t = tiny(char_vocab(), json::array());
  t["model"]["type"] = "Unigram";
  EXPECT_NE(message(t.dump()).find("unsupported model type 'Unigram'"), std::string::npos);
  t = tiny(char_vocab(), json::array());
  t["model"]["vocab"]["a"] = "x";
  EXPECT_NE(message(t.dump()).find("model.vocab.a"), std::string::npos);
  t = tiny(char_vocab(), json::array());
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Nope"}}}}};
  EXPECT_NE(message(t.dump()).find("pre_tokenizer.pretokenizers[0].type"), std::string::npos);
  EXPECT_THROW(Tokenizer::load("no/such/dir"), Error);
  EXPECT_THROW(TokenizerConfig::parse(R"({"bos_token": 3})"), Error);
}

// A number past double range is a tern::Error naming the file, not nlohmann's out_of_range; a document
// nested deeper than any real one is refused while parsing (a normalizer Sequence nested 100,000 deep
// crashed the recursive component builder), both through the fast vocab split and the whole parse.
TEST(TokenizerJson, OverflowingNumbersAndDeepNestingAreErrors) {
  json t = tiny(char_vocab(), json::array());
  std::string text = t.dump();
  text.insert(text.size() - 1, R"(, "x": 1e400)");
  EXPECT_NE(message(text).find("tokenizer.json: expected valid JSON"), std::string::npos) << message(text);
  EXPECT_NE(message(R"({"model": 1e400})").find("expected valid JSON"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"type": "Sequence", "normalizers": [)";
  deep += R"({"type": "Lowercase"})";
  for (int i = 0; i < 100000; ++i) deep += "]}";
  t["normalizer"] = nullptr;
  text = t.dump();
  const std::string with_deep = text.replace(text.find("\"normalizer\":null"), 17, "\"normalizer\":" + deep);
  EXPECT_NE(message(with_deep).find("nested at most 64 deep"), std::string::npos) << message(with_deep).substr(0, 200);
  EXPECT_NE(message("[" + deep + "]").find("nested at most 64 deep"), std::string::npos);
  try {
    TokenizerConfig::parse(R"({"bos_token": "<s>", "x": -1e999})", "tokenizer_config.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: expected valid JSON"), std::string::npos) << e.what();
  }
}

// Found by the tokenizer.json fuzzer: the vocab's fast scanner let ill-formed UTF-8 into token
// strings, so decode() could return invalid UTF-8; a post-processor could add an id the vocabulary
// does not have, which encode() then handed to the model; and one huge id made the dense id table take gigabytes.
TEST(TokenizerErrors, VocabStringsAreUtf8IdsAreDenseAndPostProcessorIdsAreInTheVocab) {
  const std::string good = tiny(char_vocab(), json::array()).dump();
  const size_t at = good.find("\"a\":");
  ASSERT_NE(at, std::string::npos);
  std::string bad = good;
  bad.replace(at, 4, "\"a\xC3\":");  // "a" followed by a lone lead byte
  EXPECT_NE(message(bad).find("expected UTF-8 tokens at model.vocab, got ill-formed UTF-8 at byte"), std::string::npos)
      << message(bad);
  json t = tiny(char_vocab(), json::array());
  const int64_t n = make(t).vocab_size();
  t["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"[CLS]", n}}, {"sep", {"a", 0}}};
  EXPECT_NE(
      message(t.dump()).find("expected special-token ids inside the vocabulary [0, 55) at post_processor, got id 55"),
      std::string::npos)
      << message(t.dump());
  t["post_processor"]["cls"] = {"a", 0};
  json sparse = tiny(char_vocab(), json::array());
  sparse["model"]["vocab"]["zz"] = 433333333;  // the id table would take gigabytes
  EXPECT_NE(message(sparse.dump()).find("expected ids below 65648 for its 56 tokens at model.vocab, got id 433333333"),
            std::string::npos)
      << message(sparse.dump());
  EXPECT_EQ(make(t).encode("b", true), (Ids{0, 2, 0}));
}

TEST(TokenizerConfig, Fields) {
  auto c = TokenizerConfig::parse(R"({"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>",
    "pad_token": null, "add_bos_token": true, "model_max_length": 1e30,
    "chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})");
  EXPECT_EQ(c.bos_token, "<s>");
  EXPECT_EQ(c.eos_token, "</s>");
  EXPECT_FALSE(c.pad_token.has_value());
  EXPECT_TRUE(c.add_bos_token);
  EXPECT_FALSE(c.add_eos_token);
  EXPECT_EQ(c.model_max_length, INT64_MAX);
  ASSERT_NE(c.chat_template("tool_use"), nullptr);
  EXPECT_EQ(*c.chat_template("tool_use"), "B");
  EXPECT_EQ(*c.chat_template(), "A");
  EXPECT_EQ(*TokenizerConfig::parse(R"({"chat_template": "T"})").chat_template(), "T");
}

}  // namespace
}  // namespace tern::text
