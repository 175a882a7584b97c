// tokenizer_config.json: the special-token strings, add_bos_token / add_eos_token, decode
// clean-up, and the chat templates (a plain string or a list of named templates).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tern::text {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;  // absent or null: nullopt
  bool add_bos_token = false;  // as written in the file; false when absent
  bool add_eos_token = false;
  bool clean_up_tokenization_spaces = false;  // transformers' decode-time clean-up
  std::optional<int64_t> model_max_length;
  std::string tokenizer_class;
  // Template name -> Jinja source. A plain-string chat_template is stored as "default".
  std::map<std::string, std::string> chat_templates;

  // Parses tokenizer_config.json text; `source` names the file in errors. An empty text gives the
  // defaults. Throws tern::Error naming the file and field on malformed JSON or a wrong type.
  static TokenizerConfig parse(std::string_view json_text, const std::string& source = "tokenizer_config.json");

  // The named template, or nullptr.
  const std::string* chat_template(const std::string& name = "default") const;
};

}  // namespace tern::text
