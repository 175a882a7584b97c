// Added-token matching: a byte trie with leftmost-longest search, then the lstrip / rstrip /
// single_word rules of tokenizers' AddedVocabulary::find_matches.
#include "tern/text/added_tokens.h"

#include <algorithm>

#include "tern/text/normalizers.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

// The code point that ends at byte offset `end` (end > 0), and where it starts.
char32_t prev_code_point(std::string_view s, size_t end, size_t& start) {
  size_t k = end - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80 && end - k < 4) --k;
  size_t i = k;
  char32_t c = next_code_point(s, i);
  start = k;
  return c;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token) {
  if (s.empty()) return;
  first_byte[static_cast<unsigned char>(s[0])] = true;
  int32_t n = 0;
  for (unsigned char b : s) {
    auto& ch = nodes[n].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
    if (it != ch.end() && it->first == b) {
      n = it->second;
    } else {
      int32_t next = static_cast<int32_t>(nodes.size());
      ch.insert(it, {b, next});
      nodes.emplace_back();
      n = next;
    }
  }
  if (nodes[n].token < 0) nodes[n].token = token;  // the first token with this content wins
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::longest(std::string_view text, size_t pos) const {
  int32_t best = -1;
  size_t best_len = 0;
  int32_t n = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& ch = nodes[n].children;
    uint8_t b = static_cast<uint8_t>(text[i]);
    auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
    if (it == ch.end() || it->first != b) break;
    n = it->second;
    if (nodes[n].token >= 0) {
      best = nodes[n].token;
      best_len = i + 1 - pos;
    }
  }
  return {best, best_len};
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const AddedToken& t = tokens_[k];
    by_id_[t.id] = k;
    by_content_.emplace(t.content, k);
    if (t.normalized && normalizer)
      normalized_.insert(normalizer->normalize(t.content), static_cast<int32_t>(k));
    else if (t.normalized)
      normalized_.insert(t.content, static_cast<int32_t>(k));
    else
      raw_.insert(t.content, static_cast<int32_t>(k));
  }
}

std::vector<TokenSplit> AddedVocabulary::split(std::string_view text, bool normalized) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  std::vector<TokenSplit> out;
  size_t start_offset = 0, pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [tok, len] = trie.longest(text, pos);
    if (tok < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[tok];
    size_t start = pos, stop = pos + len;
    pos = stop;
    if (t.single_word) {
      size_t cs = 0;
      bool start_space = start == 0 || !is_alphanumeric(prev_code_point(text, start, cs));
      size_t i = stop;
      bool stop_space = stop == text.size() || !is_alphanumeric(next_code_point(text, i));
      if (!start_space || !stop_space) continue;
    }
    if (start < start_offset) continue;  // inside whitespace an earlier rstrip consumed
    if (t.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t cs = 0;
        if (!is_whitespace(prev_code_point(text, s, cs))) break;
        s = cs;
      }
      start = s;
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t i = stop;
        if (!is_whitespace(next_code_point(text, i))) break;
        stop = i;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

}  // namespace tern::text
