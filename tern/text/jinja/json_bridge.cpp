// JSON <-> Value: from_json for template variables, dumps for the tojson filter.
#include "tern/text/jinja/json_bridge.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  using T = nlohmann::ordered_json::value_t;
  if (depth > kMaxValueDepth) failf("expected variables nested at most {} deep, got deeper", kMaxValueDepth);
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::make_list(std::move(items));
    }
    case T::object: {
      DictData d;
      for (const auto& [k, x] : j.items()) d.set(Value::string(k), from_json_at(x, depth + 1));
      return Value::make_dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c >= 0x80) {
      char32_t cp;
      size_t n = utf8_decode(s, i, cp);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<uint32_t>(0xD800 + (cp >> 10)),
                           static_cast<uint32_t>(0xDC00 + (cp & 0x3FF)));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      }
      i += n - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string dump_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

// json.dumps turns non-string keys into strings: true, null, 1, 1.5.
std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Kind::kString: return k.str();
    case Kind::kBool: return k.as_bool() ? "true" : "false";
    case Kind::kNone: return "null";
    case Kind::kInt: return std::to_string(k.as_int());
    case Kind::kFloat: return dump_float(k.as_float());
    default: failf("keys must be str, int, float, bool or None, not {}", type_name(k));
  }
}

struct Dumper {
  const DumpOptions& opt;
  std::string item_sep, key_sep;
  std::string out;
  int depth = 0;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void dump(const Value& v) {
    if (depth > 512) fail("tojson: nesting too deep");
    SizeCap::check(out.size());
    switch (v.kind()) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(v.as_int()); return;
      case Kind::kFloat: out += dump_float(v.as_float()); return;
      case Kind::kString: dump_string(out, v.str(), opt.ensure_ascii); return;
      case Kind::kList: {
        const auto& items = v.list().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        ++depth;
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent) newline(depth);
          dump(items[i]);
        }
        --depth;
        if (opt.indent) newline(depth);
        out += ']';
        return;
      }
      case Kind::kDict: {
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, x] : v.dict().entries()) entries.emplace_back(key_string(k), &x);
        if (opt.sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        if (entries.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        ++depth;
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent) newline(depth);
          dump_string(out, entries[i].first, opt.ensure_ascii);
          out += key_sep;
          dump(*entries[i].second);
        }
        --depth;
        if (opt.indent) newline(depth);
        out += '}';
        return;
      }
      default: failf("Object of type {} is not JSON serializable", type_name(v));
    }
  }
};

}  // namespace

std::string dumps(const Value& v, const DumpOptions& opt) {
  Dumper d{opt, opt.item_sep.value_or(opt.indent ? "," : ", "), opt.key_sep.value_or(": "), {}};
  d.dump(v);
  return std::move(d.out);
}

}  // namespace tern::text::jinja
