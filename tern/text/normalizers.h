// tokenizer.json normalizers: NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend,
// Nmt, BertNormalizer, ByteLevel and Sequence. They rewrite a string; offsets are not tracked.
#pragma once
#include <memory>
#include <string>

#include "tern/text/json_util.h"

namespace tern::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // s normalized. s is valid UTF-8; so is the result.
  virtual std::string normalize(std::string s) const = 0;
};

// Builds the normalizer a tokenizer.json "normalizer" value describes; nullptr for null.
// Throws tern::Error naming the field for an unknown type or a malformed field.
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const JsonPath& p);

}  // namespace tern::text
