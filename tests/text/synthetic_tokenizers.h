// Small self-contained tokenizer.json files that exercise most of the pipeline (byte-level BPE with
// Qwen's split regex, SentencePiece-style BPE with byte fallback, and the other normalizers,
// pre-tokenizers and decoders). Shared by the robustness test and the libFuzzer target.
#pragma once
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/text/unicode.h"

namespace tern::text::synthetic {

inline nlohmann::json added(int id, const std::string& content, bool special, bool lstrip = false,
                            bool rstrip = false, bool single_word = false, bool normalized = false) {
  return {{"id", id},         {"content", content},         {"special", special},      {"lstrip", lstrip},
          {"rstrip", rstrip}, {"single_word", single_word}, {"normalized", normalized}};
}

// GPT-2 / Qwen style: NFC, Split(regex) + ByteLevel, a few merges, special tokens.
inline std::string byte_level_json() {
  nlohmann::json vocab;
  for (int b = 0; b < 256; ++b) vocab[byte_char(static_cast<uint8_t>(b))] = b;
  std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"},
      {"Ċ", "Ċ"}, {"Ã", "©"}, {"o", "n"}, {"Ġa", "n"}, {"Ġan", "d"}, {"in", "g"}};
  nlohmann::json m = nlohmann::json::array();
  int id = 256;
  for (auto& [a, b] : merges) {
    vocab[a + b] = id++;
    m.push_back({a, b});
  }
  const char* qwen_re =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+";
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", {added(300, "<|end|>", true), added(301, "<think>", false), added(302, " x ", false, true, true)}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", qwen_re}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
  return j.dump();
}

// Llama 2 style: Prepend + Replace, byte fallback, unk with fuse_unk, Strip decoder, BOS template.
inline std::string sentencepiece_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int id = 3;
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = id++;
  for (const char* t : {"▁", "a", "b", "c", "d", "e", "▁a", "▁b", "ab", "▁ab", "é", "中"}) vocab[t] = id++;
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", {added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true),
                        added(400, "ab", false, false, false, true, true)}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"▁ a", "▁ b", "a b", "▁a b"}},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true}}}};
  return j.dump();
}

// The remaining components: NFKD, Lowercase, StripAccents, Strip, Replace(regex); Metaspace,
// Digits, Punctuation, Whitespace; Metaspace decoder; unk without fusion.
inline std::string misc_json() {
  nlohmann::json vocab = {{"[UNK]", 0}, {"▁", 1}};
  int id = 2;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  for (char c = '0'; c <= '9'; ++c) vocab[std::string(1, c)] = id++;
  for (const char* t : {"▁a", "▁t", "th", "▁th", ".", ",", "!", "?"}) vocab[t] = id++;
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", {added(100, "[CLS]", true), added(101, "hello", false, false, false, true, true)}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "NFKD"}},
          {{"type", "StripAccents"}},
          {{"type", "Lowercase"}},
          {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
          {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Punctuation"}, {"behavior", "Isolated"}},
          {{"type", "Digits"}, {"individual_digits", true}},
          {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}}}}}},
      {"post_processor", {{"type", "BertProcessing"}, {"cls", {"[CLS]", 100}}, {"sep", {"[CLS]", 100}}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"▁ a", "▁ t", "t h", "▁ th"}}, {"unk_token", "[UNK]"}}}};
  return j.dump();
}

}  // namespace tern::text::synthetic
