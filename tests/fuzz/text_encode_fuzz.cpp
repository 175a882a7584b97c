// libFuzzer target for the tokenizer: encode, decode, streaming decode (valid UTF-8, and equal to the
// whole decode where StreamDecoder promises it) and decoding arbitrary ids over synthetic tokenizers
// (byte-level, SentencePiece-style, and the other components) and, when TERN_FUZZ_TOKENIZER_DIR names
// a model directory, that tokenizer too. Input byte 0 picks the
// tokenizer and mode; the rest is the text (any bytes, invalid UTF-8 included) or ids.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tern/text/tokenizer.h"
#include "tern/text/unicode.h"
#include "tests/text/synthetic_tokenizers.h"

namespace {

const std::vector<tern::text::Tokenizer>& tokenizers() {
  static const std::vector<tern::text::Tokenizer> toks = [] {
    std::vector<tern::text::Tokenizer> t = {tern::text::Tokenizer::from_json(tern::text::synthetic::byte_level_json()),
                                            tern::text::Tokenizer::from_json(tern::text::synthetic::sentencepiece_json()),
                                            tern::text::Tokenizer::from_json(tern::text::synthetic::misc_json())};
    if (const char* dir = std::getenv("TERN_FUZZ_TOKENIZER_DIR")) t.push_back(tern::text::Tokenizer::load(dir));
    return t;
  }();
  return toks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const auto& toks = tokenizers();
  const uint8_t mode = data[0];
  const tern::text::Tokenizer& tok = toks[(mode & 0x0F) % toks.size()];
  const bool skip_special = mode & 0x20;
  std::vector<int32_t> ids;
  if (mode & 0x80) {  // the rest as little-endian 16-bit ids (may be out of range)
    for (size_t i = 1; i + 1 < size; i += 2) ids.push_back(static_cast<int32_t>(data[i] | (data[i + 1] << 8)) - 16);
  } else {
    std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    ids = tok.encode(text, mode & 0x10);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  std::string dec = tok.decode(ids, skip_special);
  if (!tern::text::is_valid_utf8(dec)) __builtin_trap();
  tern::text::StreamDecoder sd(tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.push(id);
  streamed += sd.finish();
  if (!tern::text::is_valid_utf8(streamed)) __builtin_trap();
  // Streaming equals the whole decode: checked for the SentencePiece-style and misc tokenizers. The
  // byte-level one can split a character still incomplete after 64 ids (StreamDecoder's one documented
  // exception), which arbitrary bytes reach.
  const size_t which = (mode & 0x0F) % toks.size();
  if ((which == 1 || which == 2) && streamed != dec) __builtin_trap();
  return 0;
}
