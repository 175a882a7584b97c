// Field access for tokenizer.json / tokenizer_config.json with errors that name the file and the
// field path ("[tokenizer] tokenizer.json: expected a string at model.unk_token, got number").
#pragma once
#include <concepts>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tern/text/regex.h"

namespace tern::text {

using Json = nlohmann::json;

// Where a JSON value sits: the file it came from and its path inside it.
struct JsonPath {
  std::string file;
  std::string path;

  JsonPath operator/(std::string_view key) const;
  JsonPath at(size_t index) const;
  // Throws tern::Error "[tokenizer] FILE: expected WHAT at PATH, got TYPE".
  [[noreturn]] void fail(std::string_view what, std::string_view got) const;
  // Same, naming the JSON type of got.
  template <class J>
    requires std::same_as<J, Json>
  [[noreturn]] void fail(std::string_view what, const J& got) const {
    fail(what, std::string_view(got.type_name()));
  }
};

// The deepest nesting the tokenizer files may have: real ones nest a few levels, and components such as
// a normalizer Sequence are built recursively, once a level.
constexpr int kMaxTokenizerJsonDepth = 64;

// Json::parse(text); every failure is a tern::Error naming the file: "[tokenizer] FILE: expected valid
// JSON, got a parse error at byte N" (or a number past double range), and documents nested deeper than
// kMaxTokenizerJsonDepth are refused while parsing ("... expected JSON nested at most 64 deep").
Json parse_json(std::string_view text, const std::string& file);

// j[key], which must exist (throws otherwise).
const Json& require(const Json& j, std::string_view key, const JsonPath& p);
std::string require_string(const Json& j, std::string_view key, const JsonPath& p);
// j[key] when present and not null, else def; throws when present with the wrong type.
std::string get_string(const Json& j, std::string_view key, const JsonPath& p, std::string def = "");
bool get_bool(const Json& j, std::string_view key, const JsonPath& p, bool def);
int64_t get_int(const Json& j, std::string_view key, const JsonPath& p, int64_t def);
// The value's "type" field.
std::string type_of(const Json& j, const JsonPath& p);

// A tokenizer.json pattern object: {"String": s} (matched literally) or {"Regex": r}.
Regex parse_pattern(const Json& j, const JsonPath& p);

// The UTF-8 of the one character in s (throws when s is not exactly one code point).
char32_t single_char(const std::string& s, const JsonPath& p);

}  // namespace tern::text
