// tokenizer.json pre-tokenizers: Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Digits,
// Punctuation, BertPreTokenizer, CharDelimiterSplit and Sequence. They cut text into pieces
// (spans of one buffer) and may rewrite the pieces (byte-level mapping, metaspace replacement).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tern/text/json_util.h"

namespace tern::text {

// A piece of a pre-tokenized string: [begin, end) in Pieces::buf. at_origin is true when the
// piece starts where the original input starts (Metaspace's prepend_scheme "first" needs it).
struct Span {
  size_t begin = 0, end = 0;
  bool at_origin = false;
};

// Text cut into pieces, in order. Pieces are never empty.
struct Pieces {
  std::string buf;
  std::vector<Span> spans;
  std::string_view view(const Span& s) const { return std::string_view(buf).substr(s.begin, s.end - s.begin); }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Cuts and rewrites p in place.
  virtual void pre_tokenize(Pieces& p) const = 0;
};

// Builds the pre-tokenizer a tokenizer.json "pre_tokenizer" value describes; nullptr for null.
// Throws tern::Error naming the field for an unknown type or a malformed field.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const JsonPath& p);

// How a split treats the delimiters it finds (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A [begin, end) range of a piece, and whether it is a delimiter match.
struct Cut {
  size_t begin, end;
  bool is_match;
};

// Appends to out the spans that splitting `piece` along `cuts` (which cover it, in piece-local
// offsets) leaves under behavior b; empty results are dropped.
void split_by_cuts(const Span& piece, const std::vector<Cut>& cuts, SplitBehavior b, std::vector<Span>& out);

}  // namespace tern::text
