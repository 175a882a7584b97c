// Python string formatting for templates: printf-style `"%s" % x` / |format, and str.format().
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

std::string str_format(Interpreter& in, const std::string& fmt, const CallArgs& args);

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Parses a non-negative decimal at fmt[i], capped so hostile widths cannot allocate gigabytes.
int parse_count(const std::string& fmt, size_t& i) {
  int64_t n = 0;
  while (i < fmt.size() && is_digit(fmt[i])) n = std::min<int64_t>(n * 10 + (fmt[i++] - '0'), 1 << 20);
  return static_cast<int>(n);
}

std::string pad(std::string s, int width, char align, char fill) {
  auto n = static_cast<int>(char_count(s));
  if (width <= n) return s;
  std::string f;
  for (int i = 0; i < width - n; ++i) f += fill;
  if (align == '<') return s + f;
  if (align == '^') {
    size_t left = f.size() / 2;
    return f.substr(0, left) + s + f.substr(left);
  }
  if (align == '=' && !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) return s.substr(0, 1) + f + s.substr(1);
  return f + s;
}

// One number through C printf, for the conversions Python shares with it (d, f, e, g, x, o).
std::string c_format(const std::string& flags, int width, int precision, char conv, const Value& v) {
  std::string spec = "%" + flags + (width > 0 ? std::to_string(width) : "");
  if (precision >= 0) spec += fmt::format(".{}", precision);
  char buf[512];
  if (conv == 'd' || conv == 'x' || conv == 'X' || conv == 'o') {
    int64_t i = 0;
    if (v.is_float()) {
      double d = v.as_float();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) fail("cannot format a float out of 64-bit integer range as an integer");
      i = static_cast<int64_t>(d);
    } else {
      i = to_int64(v);
    }
    bool neg = i < 0 && conv != 'd';
    spec += std::string("ll") + conv;
    std::snprintf(buf, sizeof(buf), spec.c_str(), neg ? -static_cast<long long>(i) : static_cast<long long>(i));
    return neg ? fmt::format("-{}", buf) : std::string(buf);
  }
  spec += conv;
  std::snprintf(buf, sizeof(buf), spec.c_str(), to_double(v));
  return buf;
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.is_list() && args.list().tuple) {
    positional = args.list().items;
  } else if (args.is_dict()) {
    mapping = &args;
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      value = mapping->dict().find(Value::string(fmt.substr(i + 1, close - i - 1)));
      if (!value) failf("KeyError: '{}'", fmt.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
    int width = parse_count(fmt, i), precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = parse_count(fmt, i);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!value) {
      if (mapping) fail("format requires a mapping");
      if (next >= positional.size()) fail("not enough arguments for format string");
      value = &positional[next++];
    }
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conv == 's' ? to_str(*value) : repr(*value);
        if (precision >= 0) {
          std::vector<size_t> off = char_offsets(s);
          if (static_cast<size_t>(precision) + 1 < off.size()) s.resize(off[precision]);
        }
        out += pad(s, width, flags.find('-') != std::string::npos ? '<' : '>', ' ');
        break;
      }
      case 'd':
      case 'i':
      case 'u': out += c_format(flags, width, precision, 'd', *value); break;
      case 'c': {
        std::string s;
        if (value->is_string()) {
          s = value->str();
        } else {
          utf8_append(s, static_cast<char32_t>(std::clamp<int64_t>(to_int64(*value), 0, 0x10FFFF)));
        }
        out += pad(s, width, flags.find('-') != std::string::npos ? '<' : '>', ' ');
        break;
      }
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'x': case 'X': case 'o':
        out += c_format(flags, width, std::min(precision, 100), conv, *value);
        break;
      default: failf("unsupported format character '{}'", conv);
    }
  }
  if (!mapping && next < positional.size() && !(args.is_list() && !args.list().tuple))
    fail("not all arguments converted during string formatting");
  return out;
}

std::string str_format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1), spec;
    i = close;
    char conv = 0;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty() || std::all_of(head.begin(), head.end(), is_digit)) {
      size_t idx = head.empty() ? auto_index++ : static_cast<size_t>(std::stoul(head.substr(0, 9)));
      if (idx >= args.args.size()) failf("Replacement index {} out of range for positional args tuple", idx);
      v = args.args[idx];
    } else {
      const Value* kw = nullptr;
      for (const auto& [k, x] : args.kwargs)
        if (k == head) kw = &x;
      if (!kw) failf("KeyError: '{}'", head);
      v = *kw;
    }
    for (size_t p = name_end; p != std::string::npos && p < field.size();) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        v = in.getattr(v, field.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) fail("Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        bool num = !key.empty() && key.size() < 18 && std::all_of(key.begin(), key.end(), is_digit);
        v = in.getitem(v, num ? Value::integer(std::stoll(key)) : Value::string(key));
        p = e + 1;
      }
    }
    // [[fill]align][sign][0][width][.precision][type]
    size_t k = 0;
    char fill = ' ', align = 0;
    if (spec.size() >= 2 && std::string_view("<>^=").find(spec[1]) != std::string_view::npos) {
      fill = spec[0];
      align = spec[1];
      k = 2;
    } else if (!spec.empty() && std::string_view("<>^=").find(spec[0]) != std::string_view::npos) {
      align = spec[0];
      k = 1;
    }
    std::string flags;
    if (k < spec.size() && (spec[k] == '+' || spec[k] == '-' || spec[k] == ' ')) flags += spec[k++];
    if (k < spec.size() && spec[k] == '0') {
      if (!align) fill = '0', align = '=';
      ++k;
    }
    int width = parse_count(spec, k), precision = -1;
    if (k < spec.size() && spec[k] == '.') {
      ++k;
      precision = parse_count(spec, k);
    }
    char type = k < spec.size() ? spec[k] : 0;
    std::string s;
    if (type == 0 || type == 's') {
      s = conv == 'r' ? repr(v) : to_str(v);
      if (precision >= 0) {
        std::vector<size_t> off = char_offsets(s);
        if (static_cast<size_t>(precision) + 1 < off.size()) s.resize(off[precision]);
      }
      if (!align) align = v.is_number() && type == 0 ? '>' : '<';
    } else if (std::string_view("dfFeEgGxXo%").find(type) != std::string_view::npos) {
      if (type == '%') {
        s = c_format(flags, 0, precision < 0 ? 6 : std::min(precision, 100), 'f', Value::number(to_double(v) * 100)) + "%";
      } else {
        s = c_format(flags, 0, type == 'd' ? -1 : std::min(precision < 0 ? 6 : precision, 100), type, v);
      }
      if (!align) align = '>';
    } else {
      failf("Unknown format code '{}' for object of type '{}'", type, type_name(v));
    }
    out += pad(s, width, align, fill);
    in.check_size(out.size());
  }
  return out;
}

}  // namespace tern::text::jinja
