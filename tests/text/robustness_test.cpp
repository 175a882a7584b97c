// Robustness: encode / decode / streaming decode on random and mutated byte strings, invalid UTF-8
// included, over synthetic tokenizers and the demo model's. Nothing may throw or crash; decode
// output is valid UTF-8; streaming equals whole decoding.
#include <gtest/gtest.h>

#include <random>

#include "tern/text/tokenizer.h"
#include "tern/text/unicode.h"
#include "tests/text/synthetic_tokenizers.h"
#include "tests/text/test_util.h"

namespace tern::text {
namespace {

std::vector<Tokenizer> tokenizers() {
  std::vector<Tokenizer> out = {Tokenizer::from_json(synthetic::byte_level_json()),
                                Tokenizer::from_json(synthetic::sentencepiece_json()),
                                Tokenizer::from_json(synthetic::misc_json()),
                                Tokenizer::load(std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m")};
  return out;
}

// Random bytes biased towards interesting UTF-8: ASCII, spaces, lead/continuation bytes, specials.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      " ",        "  ",        "\n",      "\r\n",  "\t",     "a",      "The",    "ab",     "123",    "'s",
      "é",        "e\xCC\x81", "中文",     "🙂",    "‍",      "<|end|>", "<think>", " x ",   "<s>",    "[CLS]",
      "hello",    "\xC3",      "\xE4\xB8", "\xFF",  "\x80",   "\xED\xA0\x80", "\xF4\x90\x80\x80", "\0", "▁", "ﬁ"};
  std::string s;
  int n = std::uniform_int_distribution<int>(0, 24)(rng);
  for (int i = 0; i < n; ++i) {
    if (rng() % 4 == 0)
      s += static_cast<char>(rng() & 0xFF);
    else
      s += pieces[rng() % pieces.size()];
  }
  return s;
}

TEST(Robustness, RandomAndInvalidUtf8) {
  auto toks = tokenizers();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = random_text(rng);
    const Tokenizer& tok = toks[iter % toks.size()];
    std::vector<int32_t> ids;
    ASSERT_NO_THROW(ids = tok.encode(text, iter % 2 == 0)) << nlohmann::json(utf8_lossy(text)).dump();
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    std::string dec = tok.decode(ids);
    ASSERT_TRUE(is_valid_utf8(dec));
    // byte-level BPE is lossless up to NFC (and the whitespace " x " strips around itself)
    if (iter % toks.size() == 0 && is_valid_utf8(text) && text.find('x') == std::string::npos)
      EXPECT_EQ(dec, normalize(text, NormalForm::kNFC));
    StreamDecoder sd(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    EXPECT_EQ(streamed, dec);
  }
}

TEST(Robustness, ArbitraryIdsDecode) {
  auto toks = tokenizers();
  std::mt19937 rng(99);
  for (int iter = 0; iter < 2000; ++iter) {
    const Tokenizer& tok = toks[iter % toks.size()];
    std::vector<int32_t> ids;
    int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) ids.push_back(static_cast<int32_t>(rng() % (tok.vocab_size() + 10)) - 5);
    std::string dec = tok.decode(ids, iter % 3 == 0);
    ASSERT_TRUE(is_valid_utf8(dec));
    StreamDecoder sd(tok, iter % 3 == 0);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    ASSERT_TRUE(is_valid_utf8(streamed));
  }
}

TEST(Robustness, InvalidUtf8IsReplacedLikeRust) {
  EXPECT_EQ(utf8_lossy("a\xC3" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xE4\xB8"), "\xEF\xBF\xBD");          // a truncated sequence is one U+FFFD
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: one per byte
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xFF\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  auto demo = Tokenizer::load(std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m");
  EXPECT_EQ(demo.encode("a\xFF" "b"), demo.encode("a\xEF\xBF\xBD" "b"));
}

TEST(Robustness, StreamingHoldsIncompleteCharacters) {
  auto demo = Tokenizer::load(std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m");
  auto ids = demo.encode("x 中文 y");
  StreamDecoder sd(demo);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    EXPECT_TRUE(is_valid_utf8(piece));
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos);
    all += piece;
  }
  all += sd.finish();
  EXPECT_EQ(all, "x 中文 y");
}

// A run of ByteFallback tokens decodes as a whole: "\0" alone, but one U+FFFD per byte once an invalid
// byte joins the run, also across a special token the decode skips. Streaming holds a run until a
// token the decode keeps ends it.
TEST(Robustness, StreamingHoldsByteFallbackRuns) {
  const Tokenizer tok = Tokenizer::from_json(synthetic::sentencepiece_json());
  const int32_t nul = *tok.token_to_id("<0x00>"), ef = *tok.token_to_id("<0xEF>"), bos = *tok.token_to_id("<s>");
  const std::vector<int32_t> word = tok.encode("hello");
  ASSERT_FALSE(word.empty());
  for (bool skip : {false, true}) {
    std::vector<int32_t> ids = {nul, bos, ef};
    ids.insert(ids.end(), word.begin(), word.end());
    StreamDecoder sd(tok, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    EXPECT_EQ(streamed, tok.decode(ids, skip)) << "skip specials " << skip;
  }
  EXPECT_EQ(tok.decode(std::vector<int32_t>{nul, bos, ef}, true), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

// Ids the decode skips (unknown ids; special tokens when skipped) never become the window's only
// context, however many arrive: the Metaspace decoder would then strip the next token's space as if it
// were the first (found by the fuzzer).
TEST(Robustness, StreamingKeepsContextAcrossSkippedIds) {
  const Tokenizer tok = Tokenizer::from_json(synthetic::misc_json());
  const int32_t t = *tok.token_to_id("t"), a = *tok.token_to_id("▁a"), cls = *tok.token_to_id("[CLS]");
  for (int skipped : {1, 70}) {
    std::vector<int32_t> ids = {t};
    for (int k = 0; k < skipped; ++k) ids.push_back(k % 2 ? cls : -5);
    ids.push_back(a);
    StreamDecoder sd(tok, true);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    EXPECT_EQ(streamed, tok.decode(ids, true)) << skipped << " skipped ids";
    EXPECT_EQ(streamed, "t a");
  }
}

// Found by the fuzzer (text_encode_fuzz): text through the SentencePiece-style tokenizer, decoded with
// special tokens skipped. Streaming must give valid UTF-8 and the whole decode.
TEST(Robustness, StreamingWithSpecialsSkippedStaysWhole) {
  const unsigned char raw[] = {
      0x11, 0x02, 0x48, 0x15, 0x56, 0x20, 0x6C, 0x14, 0x00, 0xE2, 0x02, 0x48, 0xAF, 0xAF, 0x48, 0x15,
      0x56, 0x20, 0x6C, 0x3C, 0x73, 0x3E, 0x14, 0x00, 0x3C, 0x73, 0x3E, 0x00, 0xBF, 0x57, 0x00, 0x33,
      0xFF, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x01, 0x68, 0x3D, 0xBB, 0xBB, 0xB9, 0xBB,
      0x6D, 0x11, 0x02, 0x48, 0x15, 0x56, 0x20, 0x6C, 0x14, 0x00, 0xE2, 0x02, 0x48, 0xAF, 0xAF, 0x48,
      0x15, 0x56, 0x20, 0x6C, 0x3C, 0x73, 0x3E, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF,
      0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD,
      0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF,
      0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF,
      0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B,
      0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B,
      0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xA0, 0x62, 0x48,
  };
  const std::string text(reinterpret_cast<const char*>(raw), sizeof raw);
  const Tokenizer tok = Tokenizer::from_json(synthetic::sentencepiece_json());
  const std::vector<int32_t> ids = tok.encode(text, false);
  const std::string dec = tok.decode(ids, true);
  ASSERT_TRUE(is_valid_utf8(dec));
  StreamDecoder sd(tok, true);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = sd.push(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << "after id " << id;
    streamed += piece;
  }
  const std::string tail = sd.finish();
  EXPECT_TRUE(is_valid_utf8(tail));
  streamed += tail;
  EXPECT_EQ(streamed, dec);
}

}  // namespace
}  // namespace tern::text
