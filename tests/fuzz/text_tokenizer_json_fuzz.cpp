// libFuzzer target: Tokenizer::from_json on arbitrary tokenizer.json text. Rejection must be a
// tern::Error; an accepted tokenizer must encode a few probe strings to ids inside its vocabulary and
// decode them (and any of its ids) to valid UTF-8. Seeds: the synthetic tokenizers of the robustness
// test (byte-level BPE, SentencePiece-style BPE, the other components).
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "tern/base/error.h"
#include "tern/text/tokenizer.h"
#include "tern/text/unicode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string json(reinterpret_cast<const char*>(data), size);
  std::optional<tern::text::Tokenizer> loaded;
  try {
    loaded.emplace(tern::text::Tokenizer::from_json(json));
  } catch (const tern::Error&) {
    return 0;
  }
  const tern::text::Tokenizer& tok = *loaded;
  static const char* kProbes[] = {"Hello world", " the  end\n\n", "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87", "a\xFF" "b",
                                  "<|end|> x <think>"};
  for (const char* p : kProbes) {
    const std::vector<int32_t> ids = tok.encode(p, true);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    }
    if (!tern::text::is_valid_utf8(tok.decode(ids, false))) std::abort();
  }
  std::vector<int32_t> all;
  for (int64_t id = 0; id < tok.vocab_size() && id < 512; ++id) all.push_back(static_cast<int32_t>(id));
  if (!tern::text::is_valid_utf8(tok.decode(all, false))) std::abort();
  return 0;
}
