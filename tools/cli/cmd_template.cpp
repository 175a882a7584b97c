// tern template: render a model directory's chat template for a request, exactly as Hugging Face
// transformers' apply_chat_template would, and print the prompt with nothing added.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tern/base/error.h"
#include "tern/base/file.h"
#include "tern/text/chat_template.h"
#include "tools/cli/command.h"

namespace tern::cli {
namespace {

int run_template(int argc, char** argv) {
  Args a("template",
         "Print the prompt a model's chat template renders for a request {\"messages\": ..., \"tools\": ..., "
         "\"add_generation_prompt\": ..., other template variables}.");
  a.positional("MODEL_DIR", "a model directory with tokenizer_config.json (or chat_template.jinja)")
      .flag("request", "FILE", "the request JSON file (- for stdin)")
      .flag("template-name", "NAME", "which named template to use when the model has several", "default");
  if (!a.parse(argc, argv)) return 0;
  TERN_CHECK(a.has("request"), "[template] expected --request FILE, got none (see tern template --help)");
  const std::string path = a.get("request");
  std::string text;
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    text = read_file(path, "template");
  }
  // Requests nest a few levels (messages, tool schemas); deeper ones are refused while parsing, as their
  // conversion to template values recurses once a level.
  constexpr int kMaxDepth = 256;
  nlohmann::ordered_json::parser_callback_t depth_guard = [&](int depth, nlohmann::json::parse_event_t,
                                                              nlohmann::ordered_json&) {
    TERN_CHECK(depth <= kMaxDepth, "[template] expected JSON in {} nested at most {} deep, got deeper", path,
               kMaxDepth);
    return true;
  };
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(text, depth_guard);
  } catch (const nlohmann::json::parse_error& e) {
    TERN_THROW("[template] expected JSON in {}, got a parse error at byte {}", path, e.byte);
  } catch (const nlohmann::json::exception& e) {  // a number past double range
    TERN_THROW("[template] expected JSON in {}, got {}", path, e.what());
  }
  text::ChatTemplate tmpl = text::load_chat_template(a.get("MODEL_DIR"), a.get("template-name"));
  std::string prompt = tmpl.render(text::chat_template_vars(request));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

TERN_COMMAND("template", "render a model's chat template for a request (as HF apply_chat_template)", run_template);

}  // namespace tern::cli
