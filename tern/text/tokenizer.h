// The tokenizer of a Hugging Face model directory (tokenizer.json + tokenizer_config.json), exact
// with respect to the `tokenizers` library: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder. Copies share one immutable pipeline; all methods are thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/text/tokenizer_config.h"

namespace tern::text {

class Tokenizer {
 public:
  // Loads MODEL_DIR/tokenizer.json, plus tokenizer_config.json and chat_template.jinja when
  // present. Throws tern::Error naming the file and field on a missing or malformed file.
  static Tokenizer load(const std::string& model_dir);
  // Builds from the text of tokenizer.json (and of tokenizer_config.json, "" for none).
  static Tokenizer from_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json = "");

  // Token ids of text. Ill-formed UTF-8 is first replaced by U+FFFD (one per maximal ill-formed
  // subsequence, as Rust's from_utf8_lossy), since tokenizers only accepts valid strings.
  // add_special_tokens applies the post-processor (BOS etc.).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // Text of ids as tokenizers' decode (ids the vocab lacks are skipped), then transformers'
  // clean-up when tokenizer_config.json asks for it. Always valid UTF-8.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Largest id + 1, counting added tokens.
  int64_t vocab_size() const;
  // Id of a token string (added tokens first, then the model's vocab).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Raw vocab string of id ("" when no token has that id).
  std::string id_to_token(int32_t id) const;
  // True for added tokens marked special.
  bool is_special(int32_t id) const;

  // Ids of tokenizer_config.json's bos/eos/pad tokens, when set and in the vocab.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

  const TokenizerConfig& config() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Streaming detokenizer for generation: push() returns the text that became final (valid UTF-8
// that later ids cannot change); finish() flushes the rest. The concatenation of all returned
// pieces equals tok.decode(all ids) (before clean-up) for the supported decoders. A run of
// ByteFallback tokens is held until a token the decode keeps ends it. One exception: text ending in
// U+FFFD is held for at most 64 ids, so a character still incomplete after that many ids can come
// out as U+FFFD pieces that the whole decode joins. Every piece is valid UTF-8 regardless. Keeps a
// reference to tok, which must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // context ids + ids whose text is not final yet
  std::string prefix_;        // decode of the context ids, already emitted
  bool in_byte_run_ = false;  // the last id the decode keeps is a ByteFallback token
};

}  // namespace tern::text
