// tokenizer.json decoders: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece,
// BPEDecoder and Sequence. Each rewrites the list of token strings (tokenizers' decode_chain);
// the tokenizer joins the result.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tern/text/json_util.h"

namespace tern::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites tokens in place. Output strings are valid UTF-8.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Builds the decoder a tokenizer.json "decoder" value describes; nullptr for null.
// Throws tern::Error naming the field for an unknown type or a malformed field.
std::unique_ptr<Decoder> make_decoder(const Json& j, const JsonPath& p);

// The byte of a ByteFallback token "<0xAB>" (as u8::from_str_radix parses the two characters), or -1
// for any other token string.
int parse_byte_token(const std::string& t);

// transformers' clean_up_tokenization: removes the space before . ? ! , and English contractions.
std::string clean_up_tokenization(std::string s);

}  // namespace tern::text
