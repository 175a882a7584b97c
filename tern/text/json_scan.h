// A fast path for loading tokenizer.json: the model's vocab and merges (most of the file) are
// scanned straight into the model's tables, and only the rest goes through nlohmann's DOM.
#pragma once
#include <functional>
#include <optional>
#include <string_view>

#include "tern/text/json_util.h"

namespace tern::text {

struct TokenizerJsonParts {
  Json doc;                  // the document with model.vocab emptied ({}) and model.merges emptied ([])
  std::string_view vocab;    // raw JSON text of model.vocab (a view into the input)
  std::string_view merges;   // raw JSON text of model.merges
};

// Splits tokenizer.json text as above. Returns nullopt when the text is not shaped as expected
// (the caller then parses it whole, which reports the error precisely). Throws on invalid JSON.
std::optional<TokenizerJsonParts> split_tokenizer_json(std::string_view text, const JsonPath& p);

// Scans a raw JSON object of string -> integer, calling fn(key, value) per member.
// Throws tern::Error at p on malformed text or a non-integer value.
void scan_vocab(std::string_view raw, const JsonPath& p, const std::function<void(std::string_view, int64_t)>& fn);

// Scans a raw JSON array of merges ("a b" strings or ["a", "b"] pairs), calling fn(a, b) per merge.
void scan_merges(std::string_view raw, const JsonPath& p,
                 const std::function<void(std::string_view, std::string_view)>& fn);

}  // namespace tern::text
