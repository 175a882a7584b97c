// ChatTemplate: the public face of the Jinja interpreter, plus loading templates and special
// tokens from a Hugging Face model directory.
#include "tern/text/chat_template.h"

#include <filesystem>
#include <new>

#include "tern/base/error.h"
#include "tern/base/file.h"
#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/interpreter.h"
#include "tern/text/jinja/json_bridge.h"
#include "tern/text/jinja/parser.h"

namespace tern::text {

struct ChatTemplate::Program {
  jinja::Body body;
};

ChatTemplate ChatTemplate::parse(const std::string& source, const TemplateLimits& limits) {
  ChatTemplate t;
  auto program = std::make_shared<Program>();
  program->body = jinja::parse_template(source, limits.max_depth);
  t.program_ = std::move(program);
  t.source_ = source;
  t.limits_ = limits;
  return t;
}

void ChatTemplate::set_default(const std::string& name, const nlohmann::ordered_json& value) { defaults_[name] = value; }

std::string ChatTemplate::render(const nlohmann::ordered_json& vars) const {
  TERN_CHECK(program_, "[template] expected a parsed template, got an empty ChatTemplate");
  TERN_CHECK(vars.is_object(), "[template] expected the variables to be a JSON object, got {}", vars.type_name());
  jinja::Limits limits{limits_.max_depth, limits_.max_steps, limits_.max_output_bytes};
  auto globals = std::make_shared<jinja::Frame>();
  jinja::install_globals(*globals);
  auto root = std::make_shared<jinja::Frame>(jinja::Frame{globals, {}});
  jinja::Interpreter in(limits, root);
  std::string out;
  try {
    for (const auto& [k, v] : defaults_.items())
      if (!vars.contains(k)) root->vars[k] = jinja::from_json(v);
    for (const auto& [k, v] : vars.items()) root->vars[k] = jinja::from_json(v);
    in.render(program_->body, out);
  } catch (const jinja::RenderError& e) {
    TERN_THROW("[template] line {}: {}", in.line(), e.message);
  } catch (const std::bad_alloc&) {
    TERN_THROW("[template] line {}: out of memory", in.line());
  }
  return out;
}

namespace {

// A special token is a string or an AddedToken object {"content": ...}; anything else is absent.
std::optional<std::string> token_string(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

ChatTemplate load_chat_template(const std::string& model_dir, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  fs::path config_path = dir / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (fs::exists(config_path)) {
    try {
      config = nlohmann::ordered_json::parse(read_file(config_path.string(), "template"));
    } catch (const nlohmann::json::exception& e) {
      TERN_THROW("[template] expected valid JSON in {}, got: {}", config_path.string(), e.what());
    }
    TERN_CHECK(config.is_object(), "[template] expected a JSON object in {}, got {}", config_path.string(), config.type_name());
  }

  std::optional<std::string> source;
  std::vector<std::string> available;
  if (name == "default" && fs::exists(dir / "chat_template.jinja"))
    source = read_file((dir / "chat_template.jinja").string(), "template");
  if (!source && config.contains("chat_template")) {
    const auto& ct = config["chat_template"];
    if (ct.is_string()) {
      available.push_back("default");
      if (name == "default") source = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const auto& entry : ct) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
            !entry["template"].is_string())
          continue;
        available.push_back(entry["name"].get<std::string>());
        if (available.back() == name) source = entry["template"].get<std::string>();
      }
    }
  }
  if (!source && name != "default" && fs::exists(dir / "additional_chat_templates" / (name + ".jinja")))
    source = read_file((dir / "additional_chat_templates" / (name + ".jinja")).string(), "template");
  if (!source) {
    std::string names;
    for (const auto& n : available) names += (names.empty() ? "" : ", ") + n;
    TERN_THROW("[template] expected a chat template named '{}' in {} (tokenizer_config.json or chat_template.jinja), got {}",
               name, model_dir, names.empty() ? std::string("no template") : "only: " + names);
  }

  ChatTemplate t = ChatTemplate::parse(*source);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (auto tok = token_string(config[key])) t.set_default(key, *tok);
  }
  return t;
}

nlohmann::ordered_json chat_template_vars(const nlohmann::ordered_json& request) {
  TERN_CHECK(request.is_object(), "[template] expected the request to be a JSON object, got {}", request.type_name());
  nlohmann::ordered_json vars = request;
  if (!vars.contains("tools")) vars["tools"] = nullptr;
  if (!vars.contains("documents")) vars["documents"] = nullptr;
  if (!vars.contains("add_generation_prompt")) vars["add_generation_prompt"] = false;
  return vars;
}

std::string apply_chat_template(const std::string& model_dir, const nlohmann::ordered_json& request) {
  return load_chat_template(model_dir).render(chat_template_vars(request));
}

}  // namespace tern::text
