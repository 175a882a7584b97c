// Hugging Face chat templates: parse a Jinja template once, render it for many requests, and load
// a model directory's template (tokenizer_config.json or chat_template.jinja) with its special tokens.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace tern::text {

// Bounds on one render so hostile templates can neither hang nor exhaust memory.
struct TemplateLimits {
  int max_depth = 200;                         // syntax nesting; macro calls in flight
  int64_t max_steps = 20'000'000;              // evaluated nodes + loop iterations + produced bytes / 16
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string or list
};

class ChatTemplate {
 public:
  // Parses once; render() many times. Throws tern::Error "[template] line L col C: expected X, got Y"
  // on syntax errors and on tags chat templates do not need (include, extends, block, import).
  static ChatTemplate parse(const std::string& source, const TemplateLimits& limits = {});

  // Renders with vars (a JSON object: messages, tools, add_generation_prompt, bos_token, ... and any
  // extra keyword such as enable_thinking) layered over the template's defaults. Key order of
  // ordered_json objects is kept (tojson output depends on it); a plain nlohmann::json converts
  // implicitly with sorted keys. raise_exception(msg) throws tern::Error whose what() is exactly msg;
  // other runtime errors throw tern::Error "[template] line L: message"; exceeded limits say which.
  std::string render(const nlohmann::ordered_json& vars) const;

  // A variable every render sees unless vars overrides it (load_chat_template sets bos_token etc.).
  void set_default(const std::string& name, const nlohmann::ordered_json& value);
  const std::string& source() const { return source_; }

 private:
  struct Program;
  std::shared_ptr<const Program> program_;  // immutable once parsed; shared by copies
  std::string source_;
  nlohmann::ordered_json defaults_ = nlohmann::ordered_json::object();
  TemplateLimits limits_;
};

// Loads the chat template of a model directory: chat_template.jinja if present (newer HF layout),
// else tokenizer_config.json's chat_template (a string, or a list of {name, template} from which
// `name` is picked; "default" when name is "default"). Special tokens (bos/eos/pad/unk, strings or
// {"content": ...} objects) become defaults. Throws tern::Error if the model has no such template.
ChatTemplate load_chat_template(const std::string& model_dir, const std::string& name = "default");

// The variables HF's apply_chat_template passes for a request {"messages", "tools",
// "add_generation_prompt", extra keywords}: tools and documents default to None and
// add_generation_prompt to false. Throws tern::Error if request is not an object.
nlohmann::ordered_json chat_template_vars(const nlohmann::ordered_json& request);

// load_chat_template(model_dir).render(chat_template_vars(request)).
std::string apply_chat_template(const std::string& model_dir, const nlohmann::ordered_json& request);

}  // namespace tern::text
