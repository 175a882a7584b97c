// Added tokens (tokenizer.json "added_tokens"): matched in the input before the model runs, as
// tokenizers' AddedVocabulary does — non-normalized tokens on the raw text, normalized tokens on
// each normalized segment — honouring lstrip, rstrip and single_word.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unordered_map>

#include "tern/text/string_map.h"

namespace tern::text {

class Normalizer;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// A piece of a split: [begin, end) of the text, and the added token it is (-1 for plain text).
struct TokenSplit {
  size_t begin, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // Indexes the tokens; normalized tokens are matched by their normalized content.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits text along the tokens of one set (normalized == false: the raw-text set). Adjacent
  // plain text stays one piece; an empty text yields no pieces.
  std::vector<TokenSplit> split(std::string_view text, bool normalized) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie answering "longest token starting here".
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
      int32_t token = -1;                                 // index into tokens_
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t token);
    // (token index, length) of the longest token at text[pos], or token -1.
    std::pair<int32_t, size_t> longest(std::string_view text, size_t pos) const;
  };
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  StringMap<size_t> by_content_;
  Trie raw_, normalized_;
};

}  // namespace tern::text
