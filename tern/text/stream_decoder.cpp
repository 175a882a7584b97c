// StreamDecoder: decodes a sliding window of ids and emits what extends the already-emitted text.
// The window keeps one id of context so decoders that treat the first token specially (Metaspace,
// Strip) see later tokens as non-first; it slides only to a cut where decoding is compositional.
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

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tok_.decode(ids_, skip_special_);
  bool extends = text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0;
  if (!extends || (ends_with_replacement(text) && ids_.size() < kMaxWindow)) return {};
  std::string out = text.substr(prefix_.size());
  // Keep the last id as context when its own text is the tail of the window's text; otherwise
  // (a byte sequence completed across ids) keep the whole window until a clean cut appears.
  std::vector<int32_t> last(ids_.end() - 1, ids_.end());
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
  size_t common = 0;
  while (common < text.size() && common < prefix_.size() && text[common] == prefix_[common]) ++common;
  ids_.clear();
  prefix_.clear();
  return text.substr(common);
}

}  // namespace tern::text
