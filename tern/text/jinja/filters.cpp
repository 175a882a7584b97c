// Jinja's built-in filters (HF's tojson included), with Jinja2 3.1's argument names and defaults.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/json_bridge.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

const Value* arg(const CallArgs& a, size_t pos, const char* name) {
  if (pos < a.args.size()) return &a.args[pos];
  for (const auto& [k, v] : a.kwargs)
    if (k == name) return &v;
  return nullptr;
}

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

// Marks a list Jinja would return as a generator (select, map, unique, ...): always truthy.
Value lazy(Value v) {
  v.list().generator = true;
  return v;
}

std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& dflt) {
  const Value* v = arg(a, pos, name);
  return v ? to_str(*v) : dflt;
}

bool bool_arg(const CallArgs& a, size_t pos, const char* name, bool dflt) {
  const Value* v = arg(a, pos, name);
  return v ? truthy(*v) : dflt;
}

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_path(Interpreter& in, Value v, const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = in.getitem(v, digits && part.size() < 18 ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

// Sort/compare key: case-folded strings unless case_sensitive.
Value sort_key(Interpreter& in, const Value& v, const Value* attribute, bool case_sensitive) {
  Value k = attribute ? get_path(in, v, to_str(*attribute)) : v;
  if (!case_sensitive && k.is_string()) return Value::string(py_lower(k.str()));
  return k;
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = bool_arg(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value::integer(length(v)); }
Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::make_list(iterate(v)); }
Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_upper(to_str(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_lower(to_str(v))); }
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_capitalize(to_str(v))); }

Value f_title(Interpreter&, const Value& v, CallArgs&) {
  // Jinja splits on runs of [-\s({[<] and capitalizes each piece.
  std::string s = to_str(v), out;
  bool word_start = true;
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_decode(s, i, cp);
    bool sep = is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (sep) {
      out.append(s, i, n);
      word_start = true;
    } else {
      utf8_append(out, word_start ? to_upper(cp) : to_lower(cp));
      word_start = false;
    }
    i += n;
  }
  return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  const Value* chars = arg(a, 0, "chars");
  std::string cs = chars && !chars->is_none() ? to_str(*chars) : "";
  return Value::string(py_strip(to_str(v), chars && !chars->is_none() ? &cs : nullptr, true, true));
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  std::string sep = str_arg(a, 0, "d", "");
  const Value* attribute = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& x : iterate(v)) {
    if (!first) out += sep;
    out += to_str(attribute ? get_path(in, x, to_str(*attribute)) : x);
    first = false;
    in.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::make_list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries()) out.push_back(Value::make_list({k, x}, true));
  return lazy(Value::make_list(std::move(out)));
}

Value f_dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
  std::string by = str_arg(a, 1, "by", "key");
  bool reverse = bool_arg(a, 2, "reverse", false);
  if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
  CallArgs none;
  std::vector<Value> items = f_items(in, v, none).list().items;
  size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare(sort_key(in, x.list().items[pos], nullptr, case_sensitive),
                    sort_key(in, y.list().items[pos], nullptr, case_sensitive));
    return reverse ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(items));
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs m;
  m.args.push_back(Value::string(str_arg(a, 0, "old", "")));
  m.args.push_back(Value::string(str_arg(a, 1, "new", "")));
  if (const Value* c = arg(a, 2, "count"); c && !c->is_none()) m.args.push_back(*c);
  Value method = *find_method(Value::string(to_str(v)), "replace");
  return in.call(method, m);
}

// Python's int(str, base) and float(str): surrounding whitespace and '_' separators allowed.
std::optional<int64_t> parse_int(std::string s, int base) {
  s = py_strip(s, nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (errno != 0 || *end != 0 || !std::isalnum(static_cast<unsigned char>(s.back()))) return std::nullopt;
  return v;
}

std::optional<double> parse_float(std::string s) {
  s = py_strip(s, nullptr, true, true);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (*end != 0) return std::nullopt;
  return d;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  Value dflt = d ? *d : Value::integer(0);
  int base = static_cast<int>(arg(a, 1, "base") ? to_int64(*arg(a, 1, "base")) : 10);
  if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36");
  auto from_double = [&](double x) {
    if (std::isnan(x)) return dflt;
    if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) fail("cannot convert float to a 64-bit integer");
    return Value::integer(static_cast<int64_t>(x));
  };
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
  if (v.is_float()) return from_double(v.as_float());
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base)) return Value::integer(*i);
    if (auto f = parse_float(v.str())) return from_double(*f);
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(to_double(v));
  if (v.is_string())
    if (auto f = parse_float(v.str())) return Value::number(*f);
  return d ? *d : Value::number(0.0);
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  int64_t i = to_int64(v);
  if (i == INT64_MIN) fail("integer overflow");
  return Value::integer(i < 0 ? -i : i);
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  int64_t precision = arg(a, 0, "precision") ? to_int64(*arg(a, 0, "precision")) : 0;
  std::string method = str_arg(a, 1, "method", "common");
  if (method != "common" && method != "ceil" && method != "floor") fail("method must be 'common', 'ceil' or 'floor'");
  if ((v.is_int() || v.is_bool()) && method == "common") return Value::integer(to_int64(v));
  double x = to_double(v), scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -308, 308)));
  double r = method == "ceil" ? std::ceil(x * scale) : method == "floor" ? std::floor(x * scale) : std::nearbyint(x * scale);
  return Value::number(r / scale);
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string ind = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w ? to_int64(*w) : 4, 0, 4096)), ' ');
  bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) failf("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v));
  std::vector<std::string> lines = py_splitlines(v.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += ind;
    out += lines[i];
    in.check_size(out.size());
  }
  if (first) out = ind + out;
  return Value::string(std::move(out));
}

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  DumpOptions opt;
  opt.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
  if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
    opt.indent = ind->is_string() ? ind->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(to_int64(*ind), 0, 4096)), ' ');
  }
  if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
    std::vector<Value> parts = iterate(*sep);
    if (parts.size() != 2) fail("tojson separators must be a pair (item_separator, key_separator)");
    opt.item_sep = to_str(parts[0]);
    opt.key_sep = to_str(parts[1]);
  }
  opt.sort_keys = bool_arg(a, 3, "sort_keys", false);
  std::string s = dumps(v, opt);
  in.check_size(s.size());
  return Value::string(std::move(s));
}

// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) matches `keep`.
Value filter_items(Interpreter& in, const Value& v, CallArgs& a, bool keep, bool by_attr) {
  size_t first_arg = by_attr ? 1 : 0;
  std::string attr = by_attr ? str_arg(a, 0, "attribute", "") : "";
  const Value* test = first_arg < a.args.size() ? &a.args[first_arg] : nullptr;
  CallArgs test_args;
  for (size_t i = first_arg + 1; i < a.args.size(); ++i) test_args.args.push_back(a.args[i]);
  test_args.kwargs = a.kwargs;
  std::vector<Value> out;
  for (const auto& x : iterate(v)) {
    in.charge(1);
    Value item = by_attr ? get_path(in, x, attr) : x;
    bool ok = test ? apply_test(in, to_str(*test), item, test_args) : truthy(item);
    if (ok == keep) out.push_back(x);
  }
  return lazy(Value::make_list(std::move(out)));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, false, true); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.kwargs) {
    if (k == "attribute") attribute = &x;
    if (k == "default") dflt = &x;
  }
  for (const auto& x : iterate(v)) {
    in.charge(1);
    if (attribute) {
      Value r = get_path(in, x, to_str(*attribute));
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    } else {
      if (a.args.empty()) fail("map requires a filter name or attribute=");
      CallArgs rest;
      rest.args.assign(a.args.begin() + 1, a.args.end());
      rest.kwargs = a.kwargs;
      out.push_back(apply_filter(in, to_str(a.args[0]), x, rest));
    }
  }
  return lazy(Value::make_list(std::move(out)));
}

// Python getattr only: dict keys are not attributes, unlike `obj.name` in a template.
Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  std::string name = str_arg(a, 0, "name", "");
  if (v.is_dict()) {
    if (auto m = find_method(v, name)) return *m;
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
  }
  return in.getattr(v, name);
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) return slice(in, v, Value::none(), Value::none(), Value::integer(-1));
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return lazy(Value::make_list(std::move(items)));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  bool reverse = bool_arg(a, 0, "reverse", false), cs = bool_arg(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  std::vector<Value> items = iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare(sort_key(in, x, attribute, cs), sort_key(in, y, attribute, cs));
    return reverse ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  bool cs = bool_arg(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Value> out, seen;
  for (const auto& x : iterate(v)) {
    Value k = sort_key(in, x, attribute, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return lazy(Value::make_list(std::move(out)));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = bool_arg(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = compare(sort_key(in, items[i], attribute, cs), sort_key(in, items[best], attribute, cs));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const auto& x : iterate(v)) total = binary_op(in, "+", total, attribute ? get_path(in, x, to_str(*attribute)) : x);
  return total;
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  Value args = a.kwargs.empty() ? Value::make_list(a.args, true) : Value::make_dict();
  if (!a.kwargs.empty())
    for (const auto& [k, x] : a.kwargs) args.dict().set(Value::string(k), x);
  std::string s = percent_format(to_str(v), args);
  in.check_size(s.size());
  return Value::string(std::move(s));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  std::string s = to_str(v);
  int64_t width = std::min<int64_t>(arg(a, 0, "width") ? to_int64(*arg(a, 0, "width")) : 80, 1 << 20);
  auto n = static_cast<int64_t>(char_count(s));
  if (width <= n) return Value::string(s);
  int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    bool w = std::isalnum(c) || c == '_' || c >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_pprint(Interpreter&, const Value& v, CallArgs&) { return Value::string(repr(v)); }

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", f_abs},         {"attr", f_attr},       {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length},    {"d", f_default},       {"default", f_default},       {"dictsort", f_dictsort},
      {"e", f_escape},        {"escape", f_escape},   {"first", f_first},           {"float", f_float},
      {"forceescape", f_escape}, {"format", f_format}, {"indent", f_indent},        {"int", f_int},
      {"items", f_items},     {"join", f_join},       {"last", f_last},             {"length", f_length},
      {"list", f_list},       {"lower", f_lower},     {"map", f_map},               {"max", f_max},
      {"min", f_min},         {"pprint", f_pprint},   {"reject", f_reject},         {"rejectattr", f_rejectattr},
      {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round},           {"safe", f_safe},
      {"select", f_select},   {"selectattr", f_selectattr}, {"sort", f_sort},       {"string", f_string},
      {"sum", f_sum},         {"title", f_title},     {"tojson", f_tojson},         {"trim", f_trim},
      {"unique", f_unique},   {"upper", f_upper},     {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  const auto& table = filter_table();
  auto it = table.find(name);
  if (it == table.end()) failf("no filter named '{}'", name);
  return it->second(in, input, args);
}

}  // namespace tern::text::jinja
