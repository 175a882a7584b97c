// Unit tests for the pipeline components, with expectations from the Hugging Face tokenizers
// documentation and source: split behaviors, pre-tokenizers, normalizers and decoders.
#include <gtest/gtest.h>

#include "tern/base/error.h"
#include "tern/text/decoders.h"
#include "tern/text/normalizers.h"
#include "tern/text/pre_tokenizers.h"
#include "tern/text/regex.h"

namespace tern::text {
namespace {

using Strings = std::vector<std::string>;

Strings pre_tokenize(const std::string& json, const std::string& text, bool at_origin = true) {
  auto pt = make_pre_tokenizer(Json::parse(json), {"test", ""});
  Pieces p;
  p.buf = text;
  p.spans.push_back({0, text.size(), at_origin});
  pt->pre_tokenize(p);
  Strings out;
  for (const Span& s : p.spans) out.emplace_back(p.view(s));
  return out;
}

std::string normalize(const std::string& json, const std::string& text) {
  return make_normalizer(Json::parse(json), {"test", ""})->normalize(text);
}

Strings decode_chain(const std::string& json, Strings tokens) {
  make_decoder(Json::parse(json), {"test", ""})->decode_chain(tokens);
  return tokens;
}

std::string split_json(const std::string& behavior, bool invert = false) {
  return R"({"type":"Split","pattern":{"String":"-"},"behavior":")" + behavior +
         R"(","invert":)" + (invert ? "true" : "false") + "}";
}

TEST(PreTokenizers, SplitBehaviors) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(pre_tokenize(split_json("Removed"), t), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("Isolated"), t), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithPrevious"), t), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithNext"), t), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("Contiguous"), t), (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("Removed", true), t), (Strings{"-", "-", "-"}));
}

TEST(PreTokenizers, SplitRegexIsolated) {
  const std::string j = R"({"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated","invert":false})";
  EXPECT_EQ(pre_tokenize(j, "a  b\tc"), (Strings{"a", "  ", "b", "\t", "c"}));
}

TEST(PreTokenizers, WhitespaceAndWhitespaceSplit) {
  const std::string t = "Hello, y'all! How are you \xF0\x9F\x98\x81 ?";
  EXPECT_EQ(pre_tokenize(R"({"type":"Whitespace"})", t),
            (Strings{"Hello", ",", "y", "'", "all", "!", "How", "are", "you", "\xF0\x9F\x98\x81", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"WhitespaceSplit"})", t),
            (Strings{"Hello,", "y'all!", "How", "are", "you", "\xF0\x9F\x98\x81", "?"}));
}

TEST(PreTokenizers, DigitsAndPunctuation) {
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":true})", "Call 123 please"),
            (Strings{"Call ", "1", "2", "3", " please"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":false})", "Call 123 please"),
            (Strings{"Call ", "123", " please"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Punctuation","behavior":"Isolated"})", "Hey friend!     How are you?!?"),
            (Strings{"Hey friend", "!", "     How are you", "?", "!", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"BertPreTokenizer"})", "Hey friend!  How?"),
            (Strings{"Hey", "friend", "!", "How", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"CharDelimiterSplit","delimiter":"x"})", "axbxxc"), (Strings{"a", "b", "c"}));
}

TEST(PreTokenizers, Metaspace) {
  const std::string always = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true})";
  EXPECT_EQ(pre_tokenize(always, "Hey friend!"), (Strings{"▁Hey", "▁friend!"}));
  EXPECT_EQ(pre_tokenize(always, "Hey  friend"), (Strings{"▁Hey", "▁", "▁friend"}));
  const std::string first = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false})";
  EXPECT_EQ(pre_tokenize(first, "Hey friend", true), (Strings{"▁Hey▁friend"}));
  EXPECT_EQ(pre_tokenize(first, "Hey friend", false), (Strings{"Hey▁friend"}));
  const std::string never = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"never"})";
  EXPECT_EQ(pre_tokenize(never, "Hey friend"), (Strings{"Hey", "▁friend"}));
  const std::string legacy = R"({"type":"Metaspace","replacement":"▁","add_prefix_space":true})";
  EXPECT_EQ(pre_tokenize(legacy, "a b"), (Strings{"▁a", "▁b"}));
}

TEST(PreTokenizers, ByteLevel) {
  const std::string j = R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})";
  EXPECT_EQ(pre_tokenize(j, "Hello my friend, how's it?"),
            (Strings{"ĠHello", "Ġmy", "Ġfriend", ",", "Ġhow", "'s", "Ġit", "?"}));
  const std::string no_regex = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})";
  EXPECT_EQ(pre_tokenize(no_regex, "a b\n\xC3\xA9"), (Strings{"aĠbĊÃ©"}));
  EXPECT_EQ(pre_tokenize(j, "  x"), (Strings{"Ġ", "Ġx"}));
}

TEST(PreTokenizers, SequenceAndErrors) {
  const std::string j =
      R"({"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true}]})";
  EXPECT_EQ(pre_tokenize(j, "ab12 c"), (Strings{"ab", "1", "2", "c"}));
  EXPECT_THROW(pre_tokenize(R"({"type":"UnicodeScripts"})", "x"), Error);
  EXPECT_THROW(pre_tokenize(R"({"type":"Split","pattern":{"Regex":"("},"behavior":"Isolated"})", "x"), Error);
  EXPECT_THROW(pre_tokenize(R"({"type":"Split","pattern":{"String":"a"},"behavior":"Sideways"})", "x"), Error);
}

TEST(Normalizers, Basic) {
  EXPECT_EQ(normalize(R"({"type":"Lowercase"})", "HeLLo \xC4\xB0\xCE\xA3"), "hello i\xCC\x87\xCF\x83");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":true,"strip_right":true})", " \t hi \xE3\x80\x80"), "hi");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":false,"strip_right":true})", "  hi  "), "  hi");
  EXPECT_EQ(normalize(R"({"type":"NFD"})", "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize(R"({"type":"NFKC"})", "\xEF\xAC\x81"), "fi");
  EXPECT_EQ(normalize(R"({"type":"NFKD"})", "\xC2\xB2\xC3\xA9"), "2e\xCC\x81");
  EXPECT_EQ(normalize(R"({"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"}]})", "\xC3\xA9lan"),
            "elan");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "})", "a \t\n b"), "a b");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"String":"."},"content":"!"})", "a.b"), "a!b");
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"▁"})", "hi"), "▁hi");
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"▁"})", ""), "");
  EXPECT_EQ(normalize(R"({"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,)"
                      R"("strip_accents":null,"lowercase":true})",
                      "H\xC3\xA9llo\tW\x01orld\xE4\xB8\xAD"),
            "hello world \xE4\xB8\xAD ");
  EXPECT_EQ(normalize(R"({"type":"Nmt"})", "a\x01" "b\tc"), "ab c");
  EXPECT_THROW(normalize(R"({"type":"Precompiled"})", "x"), Error);
}

TEST(Decoders, Components) {
  EXPECT_EQ(decode_chain(R"({"type":"ByteFallback"})", {"<0x61>", "b", "<0xE4>", "<0xB8>", "<0xAD>", "<0xFF>"}),
            (Strings{"a", "b", "\xEF\xBF\xBD", "\xEF\xBF\xBD", "\xEF\xBF\xBD", "\xEF\xBF\xBD"}));
  EXPECT_EQ(decode_chain(R"({"type":"ByteFallback"})", {"<0xE4>", "<0xB8>", "<0xAD>", "x", "<0x+A>"}),
            (Strings{"\xE4\xB8\xAD", "x", "\n"}));
  EXPECT_EQ(decode_chain(R"({"type":"Strip","content":" ","start":1,"stop":1})", {"  a ", "b"}),
            (Strings{" a", "b"}));
  EXPECT_EQ(decode_chain(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always"})", {"▁Hey", "▁friend"}),
            (Strings{"Hey", " friend"}));
  EXPECT_EQ(decode_chain(R"({"type":"Fuse"})", {"a", "b", "c"}), (Strings{"abc"}));
  EXPECT_EQ(decode_chain(R"({"type":"Replace","pattern":{"String":"▁"},"content":" "})", {"▁a▁b"}), (Strings{" a b"}));
  EXPECT_EQ(decode_chain(R"({"type":"ByteLevel"})", {"Hello", "Ġw", "orld", "Ċ", "ä¸", "Ń"}),
            (Strings{"Hello world\n\xE4\xB8\xAD"}));
  EXPECT_EQ(decode_chain(R"({"type":"ByteLevel"})", {"ä¸"}), (Strings{"\xEF\xBF\xBD"}));
  EXPECT_EQ(decode_chain(R"({"type":"WordPiece","prefix":"##","cleanup":true})", {"Hel", "##lo", "world", "."}),
            (Strings{"Hel", "lo", " world", "."}));
  EXPECT_THROW(decode_chain(R"({"type":"CTC"})", {}), Error);
}

TEST(Regex, OnigurumaClasses) {
  EXPECT_EQ(translate_onig_pattern("\\s+(?!\\S)"), std::string("[") + "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}"
            "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]+(?![^\\t\\n\\x0B\\f\\r\\x20\\x{85}"
            "\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}])");
  auto re = Regex::pattern("\\s+");
  // U+180E is not White_Space (Oniguruma) although PCRE2's own \s matches it
  EXPECT_TRUE(re.find_all("a\xE1\xA0\x8E" "b").empty());
  EXPECT_EQ(re.find_all("a\xC2\x85" "b").size(), 1u);
  // empty matches: none right after a match, one per position elsewhere
  auto empty = Regex::pattern("x*").find_all("axb");
  EXPECT_EQ(empty, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 2}, {3, 3}}));
}

}  // namespace
}  // namespace tern::text
