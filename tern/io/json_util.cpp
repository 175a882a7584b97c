// JsonReader and the JSON helpers of the config readers.
#include "tern/io/json_util.h"

#include <cmath>
#include <limits>

namespace tern::io {

using nlohmann::json;

std::string json_brief(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

json parse_json_text(const std::string& text, const std::string& path, const std::string& component) {
  // Deeper documents are refused while parsing: printing one in an error (json_brief) recurses per level.
  json::parser_callback_t depth_guard = [&](int depth, json::parse_event_t, json&) {
    TERN_CHECK(depth <= kMaxConfigJsonDepth, "[{}] {}: expected JSON nested at most {} deep, got deeper", component,
               path, kMaxConfigJsonDepth);
    return true;
  };
  try {
    return json::parse(text, depth_guard);
  } catch (const json::exception& e) {  // a syntax error, or a number past double range (out_of_range)
    std::string what = e.what();
    size_t cut = what.find("] ");
    TERN_THROW("[{}] {}: expected valid JSON, got {}", component, path,
               cut == std::string::npos ? what : what.substr(cut + 2));
  }
}

std::vector<int32_t> token_ids(const json& j, const std::string& path, const std::string& key,
                               const std::string& component) {
  auto one = [&](const json& v) {
    TERN_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) &&
                   v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                   v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
               "[{}] {}: expected key '{}' to be a token id or a list of them, got {}", component, path, key,
               json_brief(j));
    return v.get<int32_t>();
  };
  std::vector<int32_t> out;
  if (j.is_null()) return out;
  if (j.is_array()) {
    for (const json& v : j) out.push_back(one(v));
  } else {
    out.push_back(one(j));
  }
  return out;
}

const json* JsonReader::find(const std::string& key) const {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

bool JsonReader::has(const std::string& key) const {
  const json* v = find(key);
  return v && !v->is_null();
}

void JsonReader::wrong_type(const std::string& key, const char* want, const json& got) const {
  TERN_THROW("[{}] {}: expected key '{}{}' to be {}, got {}", component_, path_, prefix_, key, want, json_brief(got));
}

std::optional<int64_t> JsonReader::opt_int(const std::string& key) const {
  const json* v = find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      wrong_type(key, "a 64-bit integer", *v);
    }
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  wrong_type(key, "an integer", *v);
}

std::optional<double> JsonReader::opt_double(const std::string& key) const {
  const json* v = find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  return v->get<double>();
}

std::optional<double> JsonReader::opt_float(const std::string& key) const {
  const std::optional<double> v = opt_double(key);
  if (v && !(std::isfinite(*v) && std::fabs(*v) <= std::numeric_limits<float>::max())) {
    wrong_type(key, "a finite number within float range", *find(key));
  }
  return v;
}

std::optional<bool> JsonReader::opt_bool(const std::string& key) const {
  const json* v = find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> JsonReader::opt_string(const std::string& key) const {
  const json* v = find(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

int64_t JsonReader::req_int(const std::string& key) const {
  auto v = opt_int(key);
  TERN_CHECK(v.has_value(), "[{}] {}: expected key '{}{}'", component_, path_, prefix_, key);
  return *v;
}

}  // namespace tern::io
