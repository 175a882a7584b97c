// Typed, error-reporting access to the keys of a JSON object, shared by the config readers of io/.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tern/base/error.h"

namespace tern::io {

// A short rendering of j for error messages (at most ~80 characters, invalid UTF-8 replaced).
std::string json_brief(const nlohmann::json& j);

// The deepest nesting parse_json_text accepts (Hugging Face configs nest a few levels).
constexpr int kMaxConfigJsonDepth = 64;

// Parses text as JSON; a syntax error throws "[component] <path>: expected valid JSON, got parse
// error at line L, column C: ...", a number past double range "... got number overflow parsing ...", nesting deeper than kMaxConfigJsonDepth "... expected JSON nested
// at most 64 deep, got deeper".
nlohmann::json parse_json_text(const std::string& text, const std::string& path, const std::string& component);

// Token ids from an int or a list of ints (the eos_token_id spellings); anything else throws
// "[config] <path>: expected key '<key>' to be ...".
std::vector<int32_t> token_ids(const nlohmann::json& j, const std::string& path, const std::string& key,
                               const std::string& component = "config");

// Reads keys of one JSON object (which must outlive the reader). A null value counts as absent.
// Wrong types throw "[component] <path>: expected key '<prefix><key>' to be <type>, got <value>";
// req_* on an absent key throws "[component] <path>: expected key '<prefix><key>'".
class JsonReader {
 public:
  JsonReader(const nlohmann::json& object, std::string path, std::string prefix, std::string component = "config")
      : j_(object), path_(std::move(path)), prefix_(std::move(prefix)), component_(std::move(component)) {}

  const nlohmann::json& object() const { return j_; }
  const std::string& prefix() const { return prefix_; }
  // The value of key, or nullptr when absent (a null value is returned as is).
  const nlohmann::json* find(const std::string& key) const;
  // True when key is present and not null.
  bool has(const std::string& key) const;

  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_double(const std::string& key) const;
  // opt_double for a value kept as a float: finite and within float range ("... to be a finite number
  // within float range, got ...").
  std::optional<double> opt_float(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;
  int64_t req_int(const std::string& key) const;

 private:
  [[noreturn]] void wrong_type(const std::string& key, const char* want, const nlohmann::json& got) const;
  const nlohmann::json& j_;
  std::string path_, prefix_, component_;
};

}  // namespace tern::io
