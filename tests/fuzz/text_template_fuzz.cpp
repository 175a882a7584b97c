// libFuzzer target for chat templates: the input is a template source (any bytes); it is parsed and,
// when it parses, rendered with a fixed conversation. Only tern::Error may escape, within the limits.
#include <cstdint>
#include <string>

#include "tern/base/error.h"
#include "tern/text/chat_template.h"

namespace {

const nlohmann::ordered_json& vars() {
  static const nlohmann::ordered_json v = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is the weather in Zürich?"},
      {"role": "assistant", "content": "<think>\ncheck\n</think>\n\n", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
      {"role": "tool", "content": "{\"temp\": 21.5}"},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " thanks "}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>",
    "n": null, "i": -3, "f": 0.5, "b": true
  })");
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::text::TemplateLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_depth = 100;
  try {
    auto t = tern::text::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size), limits);
    t.render(vars());
  } catch (const tern::Error&) {
  }
  return 0;
}
