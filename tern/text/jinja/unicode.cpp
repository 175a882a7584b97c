// UTF-8 decoding, Python whitespace and the case tables the Jinja string functions use.
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

size_t utf8_decode(std::string_view s, size_t pos, char32_t& cp) {
  auto b0 = static_cast<unsigned char>(s[pos]);
  cp = b0;
  if (b0 < 0x80) return 1;
  size_t len = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || pos + len > s.size()) return 1;
  char32_t v = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) return 1;
    v = (v << 6) | (b & 0x3F);
  }
  bool overlong = (len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF));
  if (overlong || (v >= 0xD800 && v <= 0xDFFF)) return 1;
  cp = v;
  return len;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  char32_t cp;
  for (size_t i = 0; i < s.size(); i += utf8_decode(s, i, cp)) off.push_back(i);
  off.push_back(s.size());
  return off;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  char32_t cp;
  for (size_t i = 0; i < s.size(); i += utf8_decode(s, i, cp)) ++n;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) {
    char32_t cp;
    for (size_t i = 0; i < chars->size();) {
      i += utf8_decode(*chars, i, cp);
      set.push_back(cp);
    }
  }
  auto strippable = [&](char32_t cp) {
    if (!chars) return is_space(cp);
    for (char32_t c : set)
      if (c == cp) return true;
    return false;
  };
  std::vector<size_t> off = char_offsets(s);
  size_t n = off.size() - 1, b = 0, e = n;
  char32_t cp;
  if (left)
    while (b < e && (utf8_decode(s, off[b], cp), strippable(cp))) ++b;
  if (right)
    while (e > b && (utf8_decode(s, off[e - 1], cp), strippable(cp))) --e;
  return std::string(s.substr(off[b], off[e] - off[b]));
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if (c == 0xFF) return 0x178;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c >= 0x100 && c <= 0x17F && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c == 0x178) return 0xFF;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased_letter(char32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0xDF; }

namespace {

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_decode(s, i, cp);
    if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) {
      out += s[i];  // invalid byte: keep as is
    } else {
      f(out, cp);
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_chars(s, [](std::string& o, char32_t c) {
    if (c == 0xDF) {
      o += "SS";
    } else {
      utf8_append(o, to_upper(c));
    }
  });
}

std::string py_lower(std::string_view s) {
  return map_chars(s, [](std::string& o, char32_t c) { utf8_append(o, to_lower(c)); });
}

std::string py_title(std::string_view s) {
  bool prev_cased = false;
  return map_chars(s, [&](std::string& o, char32_t c) {
    bool cased = is_cased_letter(c);
    utf8_append(o, cased ? (prev_cased ? to_lower(c) : to_upper(c)) : c);
    prev_cased = cased;
  });
}

std::string py_capitalize(std::string_view s) {
  bool first = true;
  return map_chars(s, [&](std::string& o, char32_t c) {
    utf8_append(o, first ? to_upper(c) : to_lower(c));
    first = false;
  });
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  std::string cur;
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_decode(s, i, cp);
    bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
               cp == 0x2028 || cp == 0x2029;
    if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) brk = false;
    if (brk) {
      if (cp == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++n;
      lines.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(s.substr(i, n));
    }
    i += n;
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

}  // namespace tern::text::jinja
