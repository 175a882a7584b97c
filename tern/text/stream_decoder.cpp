// StreamDecoder: decodes a sliding window of ids and emits what extends the already-emitted text.
// The window keeps one id of context so decoders that treat the first token specially (Metaspace,
// Strip) see later tokens as non-first; it slides only to a cut where decoding is compositional.
// A run of ByteFallback tokens ("<0xAB>") decodes as one UTF-8 string, or as one U+FFFD per byte when
// the run is not valid UTF-8, so a later byte can change the text of earlier ones: nothing of a run
// is emitted until a token that is not skipped ends it (held ids are not decoded, so a long run costs
// one decode when it ends).
#include "tern/text/decoders.h"
#include "tern/text/tokenizer.h"

namespace tern::text {

namespace {

constexpr size_t kMaxWindow = 64;  // past this many ids, text is emitted even if it looks unfinished

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The start of the character of s that holds byte i (s valid UTF-8; i <= s.size()).
size_t char_start(const std::string& s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// Where s stops agreeing with emitted, backed up to a character boundary of s: s from there on is
// what to emit when s does not extend the emitted text (valid UTF-8, though it repeats the character
// the two disagree in).
size_t resync_point(const std::string& s, const std::string& emitted) {
  size_t common = 0;
  while (common < s.size() && common < emitted.size() && s[common] == emitted[common]) ++common;
  return char_start(s, common);
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  // Ids the decode skips (unknown, or special when skipped) neither start nor end a byte run, nor
  // serve as the window's context alone: the next id would decode as the first one.
  auto kept = [&](int32_t i) { return !tok_.id_to_token(i).empty() && !(skip_special_ && tok_.is_special(i)); };
  if (kept(id)) in_byte_run_ = parse_byte_token(tok_.id_to_token(id)) >= 0;
  if (in_byte_run_) return {};  // no decode until the run ends, however long it is
  std::string text = tok_.decode(ids_, skip_special_);
  bool extends = text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0;
  std::string out;
  if (extends) {
    if (ends_with_replacement(text) && ids_.size() < kMaxWindow) return {};
    out = text.substr(prefix_.size());
  } else if (ids_.size() >= kMaxWindow) {  // what was emitted can no longer be extended: start again
    out = text.substr(resync_point(text, prefix_));
  } else {
    return {};
  }
  // Keep the last id the decode keeps (and any skipped ones after it) as context when its text is the
  // tail of the window's text; otherwise (a byte sequence completed across ids) keep the whole window
  // until a clean cut appears.
  size_t c = ids_.size() - 1;
  while (c > 0 && !kept(ids_[c])) --c;
  std::vector<int32_t> last(ids_.begin() + static_cast<std::ptrdiff_t>(c), ids_.end());
  std::string last_text = tok_.decode(last, skip_special_);
  if (ends_with(text, last_text) || ids_.size() >= kMaxWindow) {
    ids_ = std::move(last);
    prefix_ = std::move(last_text);
  } else {
    prefix_ = std::move(text);
  }
  return out;
}

std::string StreamDecoder::finish() {
  std::string text = tok_.decode(ids_, skip_special_);
  const bool extends = text.size() >= prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0;
  std::string out = text.substr(extends ? prefix_.size() : resync_point(text, prefix_));
  ids_.clear();
  prefix_.clear();
  in_byte_run_ = false;
  return out;
}

}  // namespace tern::text
