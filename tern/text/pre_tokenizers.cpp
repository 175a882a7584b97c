// The pre-tokenizers of Hugging Face tokenizers over one buffer of pieces.
#include "tern/text/pre_tokenizers.h"

#include <algorithm>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

// The regex ByteLevel splits with when use_regex is set (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Covering cuts from a list of matches (tokenizers' Pattern::find_matches for regexes).
std::vector<Cut> cuts_from_matches(const std::vector<std::pair<size_t, size_t>>& matches, size_t len, bool invert) {
  std::vector<Cut> cuts;
  cuts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) cuts.push_back({prev, b, invert});
    cuts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != len) cuts.push_back({prev, len, invert});
  return cuts;
}

// Covering cuts where every code point that satisfies pred is its own match.
template <class Pred>
std::vector<Cut> cuts_from_chars(std::string_view s, Pred&& pred) {
  std::vector<Cut> cuts;
  size_t last = 0, i = 0;
  while (i < s.size()) {
    size_t b = i;
    char32_t c = next_code_point(s, i);
    if (pred(c)) {
      if (last < b) cuts.push_back({last, b, false});
      cuts.push_back({b, i, true});
      last = i;
    }
  }
  if (last < s.size()) cuts.push_back({last, s.size(), false});
  return cuts;
}

// Splits every piece of p with cut_fn(piece_text) -> cuts.
template <class CutFn>
void split_pieces(Pieces& p, SplitBehavior b, CutFn&& cut_fn) {
  std::vector<Span> out;
  out.reserve(p.spans.size() * 2);
  for (const Span& s : p.spans) split_by_cuts(s, cut_fn(p.view(s)), b, out);
  p.spans = std::move(out);
}

// Rewrites every piece of p with fn(piece_text, span, out) appending the new text.
template <class Fn>
void transform_pieces(Pieces& p, Fn&& fn) {
  std::string buf;
  buf.reserve(p.buf.size() + p.buf.size() / 4 + 16);
  for (Span& s : p.spans) {
    size_t b = buf.size();
    fn(p.view(s), s, buf);
    s.begin = b;
    s.end = buf.size();
  }
  p.buf = std::move(buf);
  std::erase_if(p.spans, [](const Span& s) { return s.begin == s.end; });
}

SplitBehavior parse_behavior(const Json& j, const JsonPath& p, SplitBehavior def) {
  if (!j.is_object() || !j.contains("behavior") || j["behavior"].is_null()) return def;
  std::string b = get_string(j, "behavior", p);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  (p / "behavior").fail("Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", "'" + b + "'");
}

class Split final : public PreTokenizer {
 public:
  Split(Regex re, SplitBehavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void pre_tokenize(Pieces& p) const override {
    split_pieces(p, behavior_,
                 [&](std::string_view s) { return cuts_from_matches(re_.find_all(s), s.size(), invert_); });
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

// Byte-level characters for every byte, packed for the hot mapping loop.
struct ByteChars {
  char bytes[256][2];
  uint8_t len[256];
  ByteChars() {
    for (int b = 0; b < 256; ++b) {
      const std::string& s = byte_char(static_cast<uint8_t>(b));
      len[b] = static_cast<uint8_t>(s.size());
      for (size_t k = 0; k < s.size(); ++k) bytes[b][k] = s[k];
    }
  }
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), re_(Regex::pattern(kGpt2Pattern)) {}
  void pre_tokenize(Pieces& p) const override {
    if (add_prefix_space_) {
      transform_pieces(p, [](std::string_view s, const Span&, std::string& out) {
        if (s.empty() || s[0] != ' ') out += ' ';
        out += s;
      });
    }
    if (use_regex_) {
      split_pieces(p, SplitBehavior::kIsolated,
                   [&](std::string_view s) { return cuts_from_matches(re_.find_all(s), s.size(), false); });
    }
    static const ByteChars table;
    transform_pieces(p, [](std::string_view s, const Span&, std::string& out) {
      for (unsigned char b : s) out.append(table.bytes[b], table.len[b]);
    });
  }

 private:
  bool add_prefix_space_, use_regex_;
  Regex re_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(rep_, replacement);
  }
  void pre_tokenize(Pieces& p) const override {
    transform_pieces(p, [&](std::string_view s, const Span& span, std::string& out) {
      bool starts_with_rep = s.substr(0, 1) == " " || s.substr(0, rep_.size()) == rep_;
      if (!starts_with_rep && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && span.at_origin)))
        out += rep_;
      for (char ch : s) {
        if (ch == ' ')
          out += rep_;
        else
          out += ch;
      }
    });
    if (split_) {
      split_pieces(p, SplitBehavior::kMergedWithNext, [&](std::string_view s) {
        return cuts_from_chars(s, [&](char32_t c) { return c == replacement_; });
      });
    }
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

// Splits on a character predicate (WhitespaceSplit, Digits, Punctuation, CharDelimiterSplit).
template <class Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Pred pred, SplitBehavior b) : pred_(std::move(pred)), behavior_(b) {}
  void pre_tokenize(Pieces& p) const override {
    split_pieces(p, behavior_, [&](std::string_view s) { return cuts_from_chars(s, pred_); });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplit<Pred>>(std::move(pred), b);
}

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void pre_tokenize(Pieces& p) const override {
    for (const auto& t : items_) t->pre_tokenize(p);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

bool is_bert_punctuation(char32_t c) { return is_punctuation(c); }

}  // namespace

void split_by_cuts(const Span& piece, const std::vector<Cut>& cuts, SplitBehavior b, std::vector<Span>& out) {
  // (begin, end, removed) in piece-local offsets
  struct Part {
    size_t begin, end;
    bool removed;
  };
  std::vector<Part> parts;
  parts.reserve(cuts.size());
  bool previous_match = false;
  switch (b) {
    case SplitBehavior::kIsolated:
      for (const Cut& c : cuts) parts.push_back({c.begin, c.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Cut& c : cuts) parts.push_back({c.begin, c.end, c.is_match});
      break;
    case SplitBehavior::kContiguous:
      for (const Cut& c : cuts) {
        if (c.is_match == previous_match && !parts.empty())
          parts.back().end = c.end;
        else
          parts.push_back({c.begin, c.end, false});
        previous_match = c.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Cut& c : cuts) {
        if (c.is_match && !previous_match && !parts.empty())
          parts.back().end = c.end;
        else
          parts.push_back({c.begin, c.end, false});
        previous_match = c.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
        if (it->is_match && !previous_match && !parts.empty())
          parts.back().begin = it->begin;
        else
          parts.push_back({it->begin, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Part& part : parts) {
    if (part.removed || part.begin == part.end) continue;
    out.push_back({piece.begin + part.begin, piece.begin + part.end, piece.at_origin && part.begin == 0});
  }
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const JsonPath& p) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, p);
  if (type == "Split") {
    return std::make_unique<Split>(parse_pattern(require(j, "pattern", p), p / "pattern"),
                                   parse_behavior(j, p, SplitBehavior::kRemoved), get_bool(j, "invert", p, false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(get_bool(j, "add_prefix_space", p, true), get_bool(j, "use_regex", p, true));
  if (type == "Metaspace") {
    std::string rep = get_string(j, "replacement", p, "\xE2\x96\x81");
    PrependScheme scheme = get_bool(j, "add_prefix_space", p, true) ? PrependScheme::kAlways : PrependScheme::kNever;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      std::string s = get_string(j, "prepend_scheme", p);
      if (s == "always") scheme = PrependScheme::kAlways;
      else if (s == "first") scheme = PrependScheme::kFirst;
      else if (s == "never") scheme = PrependScheme::kNever;
      else (p / "prepend_scheme").fail("always, first or never", "'" + s + "'");
    }
    return std::make_unique<Metaspace>(single_char(rep, p / "replacement"), scheme, get_bool(j, "split", p, true));
  }
  if (type == "Whitespace") {
    auto re = Regex::pattern("\\w+|[^\\w\\s]+");
    return std::make_unique<Split>(std::move(re), SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") return char_split([](char32_t c) { return is_whitespace(c); }, SplitBehavior::kRemoved);
  if (type == "Digits") {
    bool individual = get_bool(j, "individual_digits", p, false);
    return char_split([](char32_t c) { return is_numeric(c); },
                      individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation")
    return char_split([](char32_t c) { return is_punctuation(c); }, parse_behavior(j, p, SplitBehavior::kIsolated));
  if (type == "CharDelimiterSplit") {
    char32_t d = single_char(require_string(j, "delimiter", p), p / "delimiter");
    return char_split([d](char32_t c) { return c == d; }, SplitBehavior::kRemoved);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    items.push_back(char_split([](char32_t c) { return is_whitespace(c); }, SplitBehavior::kRemoved));
    items.push_back(char_split([](char32_t c) { return is_bert_punctuation(c); }, SplitBehavior::kIsolated));
    return std::make_unique<Sequence>(std::move(items));
  }
  if (type == "Sequence") {
    const Json& arr = require(j, "pretokenizers", p);
    if (!arr.is_array()) (p / "pretokenizers").fail("an array", arr);
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto t = make_pre_tokenizer(arr[i], (p / "pretokenizers").at(i));
      if (t) items.push_back(std::move(t));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  (p / "type").fail("a supported pre-tokenizer (Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Digits, "
                    "Punctuation, CharDelimiterSplit, BertPreTokenizer, Sequence)",
                    "'" + type + "'");
}

}  // namespace tern::text
