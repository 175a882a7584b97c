// JSON field helpers with file + path error messages.
#include "tern/text/json_util.h"

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

JsonPath JsonPath::operator/(std::string_view key) const {
  return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
}

JsonPath JsonPath::at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }

void JsonPath::fail(std::string_view what, std::string_view got) const {
  TERN_THROW("[tokenizer] {}: expected {} at {}, got {}", file, what, path.empty() ? "top level" : path, got);
}

Json parse_json(std::string_view text, const std::string& file) {
  Json::parser_callback_t depth_guard = [&file](int depth, Json::parse_event_t, Json&) {
    TERN_CHECK(depth <= kMaxTokenizerJsonDepth, "[tokenizer] {}: expected JSON nested at most {} deep, got deeper",
               file, kMaxTokenizerJsonDepth);
    return true;
  };
  try {
    return Json::parse(text, depth_guard);
  } catch (const Json::parse_error& e) {
    TERN_THROW("[tokenizer] {}: expected valid JSON, got a parse error at byte {}", file, e.byte);
  } catch (const Json::exception& e) {  // a number past double range
    TERN_THROW("[tokenizer] {}: expected valid JSON, got {}", file, e.what());
  }
}

const Json& require(const Json& j, std::string_view key, const JsonPath& p) {
  if (!j.is_object()) p.fail("an object", j);
  auto it = j.find(key);
  if (it == j.end()) (p / key).fail("a value", "nothing");
  return *it;
}

std::string require_string(const Json& j, std::string_view key, const JsonPath& p) {
  const Json& v = require(j, key, p);
  if (!v.is_string()) (p / key).fail("a string", v);
  return v.get<std::string>();
}

std::string get_string(const Json& j, std::string_view key, const JsonPath& p, std::string def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_string()) (p / key).fail("a string", *it);
  return it->get<std::string>();
}

bool get_bool(const Json& j, std::string_view key, const JsonPath& p, bool def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) (p / key).fail("a boolean", *it);
  return it->get<bool>();
}

int64_t get_int(const Json& j, std::string_view key, const JsonPath& p, int64_t def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number_integer()) (p / key).fail("an integer", *it);
  return it->get<int64_t>();
}

std::string type_of(const Json& j, const JsonPath& p) { return require_string(j, "type", p); }

Regex parse_pattern(const Json& j, const JsonPath& p) {
  if (j.is_object() && j.contains("String") && j["String"].is_string())
    return Regex::literal(j["String"].get<std::string>());
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string())
    return Regex::pattern(j["Regex"].get<std::string>());
  p.fail("a pattern {\"String\": ...} or {\"Regex\": ...}", j.dump().substr(0, 80));
}

char32_t single_char(const std::string& s, const JsonPath& p) {
  size_t i = 0;
  char32_t c = s.empty() ? 0 : next_code_point(s, i);
  if (s.empty() || i != s.size()) p.fail("a single character", "'" + s + "'");
  return c;
}

}  // namespace tern::text
