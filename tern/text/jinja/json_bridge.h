// Conversions between Jinja values and JSON: request variables in, Python json.dumps out.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tern/text/jinja/value.h"

namespace tern::text::jinja {

// JSON -> Value: objects become insertion-ordered dicts, integers beyond int64 become floats.
// Fails (RenderError) for nesting deeper than kMaxValueDepth.
Value from_json(const nlohmann::ordered_json& j);

// Options of Python's json.dumps that HF's tojson filter exposes.
struct DumpOptions {
  std::optional<std::string> indent;  // per-level indent; nullopt: one line
  std::optional<std::string> item_sep, key_sep;  // nullopt: Python's defaults (", " or "," when indented; ": ")
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};

// Python's json.dumps(v, ...) with HF's tojson defaults (ensure_ascii=False, no sorting).
// Fails (RenderError) on undefined, namespaces and callables, as Python's encoder does.
std::string dumps(const Value& v, const DumpOptions& opt);

}  // namespace tern::text::jinja
