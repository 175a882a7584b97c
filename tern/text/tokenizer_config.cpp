// tokenizer_config.json parsing.
#include "tern/text/tokenizer_config.h"

#include "tern/base/error.h"
#include "tern/text/json_util.h"

namespace tern::text {

namespace {

// A special token is written as a string, null, or an AddedToken object {"content": ...}.
std::optional<std::string> token_field(const Json& j, const char* key, const JsonPath& p) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return require_string(*it, "content", p / key);
  (p / key).fail("a string, null or {\"content\": ...}", *it);
}

}  // namespace

TokenizerConfig TokenizerConfig::parse(std::string_view json_text, const std::string& source) {
  TokenizerConfig c;
  if (json_text.empty()) return c;
  JsonPath p{source, ""};
  const Json j = parse_json(json_text, source);
  if (!j.is_object()) p.fail("an object", j);
  c.bos_token = token_field(j, "bos_token", p);
  c.eos_token = token_field(j, "eos_token", p);
  c.pad_token = token_field(j, "pad_token", p);
  c.unk_token = token_field(j, "unk_token", p);
  c.add_bos_token = get_bool(j, "add_bos_token", p, false);
  c.add_eos_token = get_bool(j, "add_eos_token", p, false);
  c.clean_up_tokenization_spaces = get_bool(j, "clean_up_tokenization_spaces", p, false);
  c.tokenizer_class = get_string(j, "tokenizer_class", p);
  if (auto it = j.find("model_max_length"); it != j.end() && it->is_number()) {
    double v = it->get<double>();
    c.model_max_length = v >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(v);
  }
  if (auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
    JsonPath at = p / "chat_template";
    if (it->is_string()) {
      c.chat_templates["default"] = it->get<std::string>();
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        const Json& e = (*it)[i];
        c.chat_templates[require_string(e, "name", at.at(i))] = require_string(e, "template", at.at(i));
      }
    } else {
      at.fail("a string or a list of {\"name\", \"template\"}", *it);
    }
  }
  return c;
}

const std::string* TokenizerConfig::chat_template(const std::string& name) const {
  auto it = chat_templates.find(name);
  return it == chat_templates.end() ? nullptr : &it->second;
}

}  // namespace tern::text
