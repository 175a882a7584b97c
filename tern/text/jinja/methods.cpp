// Methods templates call on values: str (startswith, split, strip, replace, format, ...), dict
// (items, keys, values, get) and list (index, count). Mutating methods fail, as in HF's immutable sandbox.
#include <algorithm>
#include <cstring>

#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

std::string str_format(Interpreter& in, const std::string& fmt, const CallArgs& args);  // format.cpp

namespace {

const std::string& need_str(const CallArgs& a, size_t pos, const char* name, const char* method) {
  const Value* v = arg(a, pos, name);
  if (!v) failf("{}() missing required argument '{}'", method, name);
  if (!v->is_string()) failf("{}() argument must be str, not {}", method, type_name(*v));
  return v->str();
}

std::optional<std::string> opt_str(const CallArgs& a, size_t pos, const char* name) {
  const Value* v = arg(a, pos, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) failf("argument '{}' must be str or None, not {}", name, type_name(*v));
  return v->str();
}

int64_t opt_int(const CallArgs& a, size_t pos, const char* name, int64_t dflt) {
  const Value* v = arg(a, pos, name);
  return v && !v->is_none() ? to_int64(*v) : dflt;
}

bool affix(const std::string& s, const CallArgs& a, bool prefix) {
  const Value* p = arg(a, 0, prefix ? "prefix" : "suffix");
  if (!p) failf("{}() takes at least 1 argument", prefix ? "startswith" : "endswith");
  std::vector<Value> options = p->is_list() && p->list().tuple ? p->list().items : std::vector<Value>{*p};
  for (const auto& o : options) {
    if (!o.is_string()) failf("{} first arg must be str or a tuple of str, not {}", prefix ? "startswith" : "endswith", type_name(o));
    const std::string& x = o.str();
    if (x.size() > s.size()) continue;
    if (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0) return true;
  }
  return false;
}

Value split(const std::string& s, const CallArgs& a, bool from_right) {
  std::optional<std::string> sep = opt_str(a, 0, "sep");
  int64_t maxsplit = opt_int(a, 1, "maxsplit", -1);
  std::vector<Value> parts;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    if (!from_right) {
      size_t start = 0;
      for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
        size_t at = s.find(*sep, start);
        if (at == std::string::npos) break;
        parts.push_back(Value::string(s.substr(start, at - start)));
        SizeCap::check(parts.size() * sizeof(Value));
        start = at + sep->size();
      }
      parts.push_back(Value::string(s.substr(start)));
    } else {
      size_t end = s.size();
      for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
        if (end < sep->size()) break;
        size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string::npos) break;
        parts.push_back(Value::string(s.substr(at + sep->size(), end - at - sep->size())));
        SizeCap::check(parts.size() * sizeof(Value));
        end = at;
      }
      parts.push_back(Value::string(s.substr(0, end)));
      std::reverse(parts.begin(), parts.end());
    }
    return Value::make_list(std::move(parts));
  }
  // Whitespace split: runs of whitespace separate, no empty strings.
  std::vector<size_t> off = char_offsets(s);
  size_t n = off.size() - 1;
  auto space = [&](size_t i) {
    char32_t cp;
    size_t len = utf8_decode(s, off[i], cp);
    return is_space(cp) && !(len == 1 && static_cast<unsigned char>(s[off[i]]) >= 0x80);
  };
  std::vector<std::pair<size_t, size_t>> words;
  for (size_t i = 0; i < n;) {
    while (i < n && space(i)) ++i;
    if (i >= n) break;
    size_t j = i;
    while (j < n && !space(j)) ++j;
    words.emplace_back(i, j);
    SizeCap::check(words.size() * sizeof(Value));
    i = j;
  }
  if (maxsplit >= 0 && static_cast<size_t>(maxsplit) < words.size()) {
    if (!from_right) {
      size_t keep = static_cast<size_t>(maxsplit);
      size_t last_start = words[keep].first;
      words.resize(keep);
      std::string rest = s.substr(off[last_start]);
      for (auto [b, e] : words) parts.push_back(Value::string(s.substr(off[b], off[e] - off[b])));
      parts.push_back(Value::string(rest));
      return Value::make_list(std::move(parts));
    }
    size_t first_kept = words.size() - static_cast<size_t>(maxsplit);
    std::string rest = s.substr(0, off[words[first_kept - 1].second]);
    parts.push_back(Value::string(rest));
    for (size_t w = first_kept; w < words.size(); ++w)
      parts.push_back(Value::string(s.substr(off[words[w].first], off[words[w].second] - off[words[w].first])));
    return Value::make_list(std::move(parts));
  }
  for (auto [b, e] : words) parts.push_back(Value::string(s.substr(off[b], off[e] - off[b])));
  return Value::make_list(std::move(parts));
}

Value replace(Interpreter& in, const std::string& s, const CallArgs& a) {
  const std::string& old = need_str(a, 0, "old", "replace");
  const std::string& rep = need_str(a, 1, "new", "replace");
  int64_t count = opt_int(a, 2, "count", -1);
  std::string out;
  if (old.empty()) {
    std::vector<size_t> off = char_offsets(s);
    int64_t done = 0;
    for (size_t i = 0; i < off.size(); ++i) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (i + 1 < off.size()) out.append(s, off[i], off[i + 1] - off[i]);
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += rep;
    start = at + old.size();
    in.check_size(out.size());
  }
  out.append(s, start, std::string::npos);
  in.check_size(out.size());
  return Value::string(std::move(out));
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  char32_t cp;
  for (size_t i = 0; i < s.size(); i += utf8_decode(s, i, cp)) {
    utf8_decode(s, i, cp);
    if (!pred(cp)) return false;
  }
  return true;
}

Value string_method(Interpreter& in, const std::string& s, const std::string& name, const CallArgs& a) {
  if (name == "startswith") return Value::boolean(affix(s, a, true));
  if (name == "endswith") return Value::boolean(affix(s, a, false));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    std::optional<std::string> chars = opt_str(a, 0, "chars");
    return Value::string(py_strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") return split(s, a, false);
  if (name == "rsplit") return split(s, a, true);
  if (name == "splitlines") {
    std::vector<Value> out;
    SizeCap::check(static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; })) *
                   sizeof(Value));
    for (auto& l : py_splitlines(s)) out.push_back(Value::string(std::move(l)));
    return Value::make_list(std::move(out));
  }
  if (name == "replace") return replace(in, s, a);
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string& sub = need_str(a, 0, "sub", name.c_str());
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(char_count(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(char_count(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& x : iterate(a.args.empty() ? Value::make_list({}) : a.args[0])) {
      if (!x.is_string()) failf("sequence item: expected str instance, {} found", type_name(x));
      if (!first) out += s;
      out += x.str();
      first = false;
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(str_format(in, s, a));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = need_str(a, 0, "affix", name.c_str());
    bool pre = name == "removeprefix";
    if (x.size() <= s.size() && (pre ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return Value::string(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return Value::boolean(all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::boolean(all_chars(s, [](char32_t c) { return is_cased_letter(c) || c > 0x2000; }));
  if (name == "isalnum")
    return Value::boolean(all_chars(s, [](char32_t c) { return (c >= '0' && c <= '9') || is_cased_letter(c) || c > 0x2000; }));
  if (name == "isspace") return Value::boolean(all_chars(s, is_space));
  if (name == "islower" || name == "isupper") {
    CallArgs none;
    return Value::boolean(apply_test(in, name == "islower" ? "lower" : "upper", Value::string(s), none));
  }
  failf("'str' object has no method '{}'", name);
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& a) {
  const DictData& d = self.dict();
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.entries()) {
      out.push_back(name == "items" ? Value::make_list({k, v}, true) : name == "keys" ? k : v);
    }
    return Value::make_list(std::move(out));
  }
  if (name == "get") {
    if (a.args.empty()) fail("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(a.args[0])) return *v;
    return a.args.size() > 1 ? a.args[1] : Value::none();
  }
  if (name == "copy") return Value::make_dict(d);
  failf("access to attribute '{}' of 'dict' object is unsafe.", name);
}

Value list_method(const Value& self, const std::string& name, const CallArgs& a) {
  const auto& items = self.list().items;
  if (name == "index" || name == "count") {
    if (a.args.empty()) failf("{}() takes exactly one argument (0 given)", name);
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], a.args[0])) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") fail("x is not in list");
    return Value::integer(n);
  }
  if (name == "copy") return Value::make_list(items, self.list().tuple);
  failf("access to attribute '{}' of '{}' object is unsafe.", name, type_name(self));
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

}  // namespace

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    if (!is_one_of(name, {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
                          "replace", "lower", "upper", "title", "capitalize", "find", "rfind", "index", "rindex",
                          "count", "join", "format", "removeprefix", "removesuffix", "isdigit", "isnumeric",
                          "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper"}))
      return std::nullopt;
    return Value::make_callable("str." + name, [self = obj.str(), name](Interpreter& in, CallArgs& a) {
      return string_method(in, self, name, a);
    });
  }
  if (obj.is_dict()) {
    if (!is_one_of(name, {"items", "keys", "values", "get", "copy", "pop", "popitem", "setdefault", "update", "clear"}))
      return std::nullopt;
    return Value::make_callable("dict." + name, [self = obj, name](Interpreter&, CallArgs& a) { return dict_method(self, name, a); });
  }
  if (obj.is_list()) {
    if (!is_one_of(name, {"index", "count", "copy", "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
      return std::nullopt;
    return Value::make_callable("list." + name, [self = obj, name](Interpreter&, CallArgs& a) { return list_method(self, name, a); });
  }
  return std::nullopt;
}

}  // namespace tern::text::jinja
