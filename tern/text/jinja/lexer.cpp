// Jinja lexing with the exact whitespace rules of Jinja2 3.1's lexer (trim_blocks, lstrip_blocks,
// strip signs, raw blocks, bracket balancing inside tags).
#include "tern/text/jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tern/base/error.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

namespace {

const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                  ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}", ";"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        src_ += '\n';
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      char kind = src_[start + 1];
      size_t after = start + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      size_t raw_body = kind == '%' ? match_raw_begin(after) : std::string::npos;
      emit_text(strip_before(src_.substr(pos_, start - pos_), sign, kind != '{'), pos_);
      if (raw_body != std::string::npos) {
        lex_raw(raw_body);
      } else if (kind == '#') {
        lex_comment(after);
      } else {
        lex_tag(start, after, kind == '%');
      }
    }
    Token eof;
    eof.type = Tok::kEof;
    set_pos(eof, src_.size());
    out_.push_back(eof);
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& msg) {
    Token t;
    set_pos(t, at);
    TERN_THROW("[template] line {} col {}: {}", t.line, t.col, msg);
  }

  void set_pos(Token& t, size_t at) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - 1;
    t.line = static_cast<int>(it - line_starts_.begin()) + 1;
    t.col = static_cast<int>(at - *it) + 1;
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  size_t skip_space(size_t p) const {
    char32_t cp;
    while (p < src_.size()) {
      size_t n = utf8_decode(src_, p, cp);
      if (!is_space(cp) || (n == 1 && static_cast<unsigned char>(src_[p]) >= 0x80)) break;
      p += n;
    }
    return p;
  }

  static bool all_space(const std::string& s, size_t from) {
    char32_t cp;
    for (size_t p = from; p < s.size();) {
      size_t n = utf8_decode(s, p, cp);
      if (!is_space(cp) || (n == 1 && static_cast<unsigned char>(s[p]) >= 0x80)) return false;
      p += n;
    }
    return true;
  }

  // The data before a tag, after the tag's strip sign or lstrip_blocks has had its say.
  std::string strip_before(std::string text, char sign, bool lstrip_applies) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign != '+' && lstrip_applies) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_space(text, l_pos)) text.resize(l_pos);
    }
    return text;
  }

  void emit_text(std::string text, size_t at) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kText;
    t.text = std::move(text);
    set_pos(t, at);
    out_.push_back(std::move(t));
  }

  // Consumes a tag end ("%}" or "}}" with its sign) at pos_ if one is there; applies trim_blocks.
  bool match_end(bool block) {
    const char* close = block ? "%}" : "}}";
    if (src_.compare(pos_, 3, std::string("-") + close) == 0) {
      pos_ = skip_space(pos_ + 3);
    } else if (block && src_.compare(pos_, 3, std::string("+") + close) == 0) {
      pos_ += 3;
    } else if (src_.compare(pos_, 2, close) == 0) {
      pos_ += 2;
      if (block && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
    } else {
      return false;
    }
    line_starting_ = src_[pos_ - 1] == '\n';
    return true;
  }

  // After "{%" and its sign: if this is "raw %}", returns where the raw body starts.
  size_t match_raw_begin(size_t p) const {
    p = skip_space(p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p = skip_space(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return skip_space(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  void lex_raw(size_t body) {
    line_starting_ = src_[body - 1] == '\n';
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_space(q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = skip_space(q + 6);
      pos_ = q;
      if (!match_end(true)) continue;
      emit_text(strip_before(src_.substr(body, p - body), sign, true), body);
      return;
    }
    error(body, "missing end of raw directive");
  }

  void lex_comment(size_t content) {
    size_t q = src_.find("#}", content);
    if (q == std::string::npos) error(content, "missing end of comment tag");
    char sign = q > content && (src_[q - 1] == '-' || src_[q - 1] == '+') ? src_[q - 1] : 0;
    pos_ = q + 2;
    if (sign == '-') {
      pos_ = skip_space(pos_);
    } else if (sign == 0 && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = src_[pos_ - 1] == '\n';
  }

  void push(Tok type, std::string text, size_t at) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    set_pos(t, at);
    out_.push_back(std::move(t));
  }

  void lex_tag(size_t start, size_t after, bool block) {
    push(block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", start);
    pos_ = after;
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) error(pos_, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (balance.empty()) {
        size_t at = pos_;
        if (match_end(block)) {
          push(block ? Tok::kBlockEnd : Tok::kVarEnd, block ? "%}" : "}}", at);
          return;
        }
      }
      size_t ws = skip_space(pos_);
      if (ws != pos_) {
        pos_ = ws;
        continue;
      }
      char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        push(Tok::kName, src_.substr(pos_, e - pos_), pos_);
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(balance);
      }
    }
  }

  void lex_operator(std::vector<char>& balance) {
    for (const char* op : kOperators) {
      size_t n = std::strlen(op);
      if (src_.compare(pos_, n, op) != 0) continue;
      char c = op[0];
      if (n == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) error(pos_, fmt::format("unexpected '{}'", c));
        if (balance.back() != c) error(pos_, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
        balance.pop_back();
      }
      push(Tok::kOp, op, pos_);
      pos_ += n;
      return;
    }
    char32_t cp;
    size_t n = utf8_decode(src_, pos_, cp);
    error(pos_, fmt::format("unexpected char '{}'", src_.substr(pos_, n)));
  }

  // Digits with optional '_' separators starting at p; returns the end.
  size_t digits(size_t p) const {
    size_t s = p;
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p > s && p + 1 < src_.size() && is_digit(src_[p + 1]))))
      ++p;
    return p;
  }

  void lex_number() {
    size_t start = pos_;
    bool after_dot = start > 0 && src_[start - 1] == '.';
    std::string clean;
    auto take = [&](size_t a, size_t b) {
      for (size_t i = a; i < b; ++i)
        if (src_[i] != '_') clean += src_[i];
    };
    if (!after_dot) {
      size_t e = digits(start), p = e;
      bool is_float = false;
      if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
        p = digits(p + 1);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && is_digit(src_[q])) {
          p = digits(q);
          is_float = true;
        }
      }
      if (is_float) {
        take(start, p);
        Token t;
        t.type = Tok::kFloat;
        t.text = clean;
        t.float_value = std::strtod(clean.c_str(), nullptr);
        set_pos(t, start);
        out_.push_back(std::move(t));
        pos_ = p;
        return;
      }
    }
    size_t p = start;
    int base = 10;
    if (src_[p] == '0' && p + 1 < src_.size() && std::strchr("bBoOxX", src_[p + 1]) && src_[p + 1] != 0) {
      char b = static_cast<char>(src_[p + 1] | 0x20);
      base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
      size_t q = p + 2;
      while (q < src_.size() && (src_[q] == '_' || (hex_value(src_[q]) >= 0 && hex_value(src_[q]) < base))) ++q;
      take(p + 2, q);
      if (clean.empty()) error(start, "invalid integer literal");
      p = q;
    } else if (src_[p] == '0') {
      while (p < src_.size() && (src_[p] == '0' || (src_[p] == '_' && p + 1 < src_.size() && src_[p + 1] == '0'))) ++p;
      clean = "0";
    } else {
      p = digits(p);
      take(start, p);
    }
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(clean.c_str(), &end, base);
    if (errno != 0 || *end != 0) error(start, "integer literal out of range");
    Token t;
    t.type = Tok::kInt;
    t.text = src_.substr(start, p - start);
    t.int_value = v;
    set_pos(t, start);
    out_.push_back(std::move(t));
    pos_ = p;
  }

  void lex_string(char quote) {
    size_t start = pos_, p = pos_ + 1;
    std::string val;
    while (true) {
      if (p >= src_.size()) error(start, "unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        val += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) error(start, "unterminated string literal");
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': val += '\\'; break;
        case '\'': val += '\''; break;
        case '"': val += '"'; break;
        case 'a': val += '\a'; break;
        case 'b': val += '\b'; break;
        case 'f': val += '\f'; break;
        case 'n': val += '\n'; break;
        case 'r': val += '\r'; break;
        case 't': val += '\t'; break;
        case 'v': val += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            int h = p + k < src_.size() ? hex_value(src_[p + k]) : -1;
            if (h < 0) error(p - 2, fmt::format("truncated \\{} escape in string literal", e));
            cp = cp * 16 + static_cast<char32_t>(h);
          }
          if (cp > 0x10FFFF) error(p - 2, "illegal Unicode character in string literal");
          p += n;
          utf8_append(val, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) cp = cp * 8 + (src_[p++] - '0');
            utf8_append(val, cp);
          } else {
            val += '\\';
            val += e;
          }
      }
    }
    Token t;
    t.type = Tok::kString;
    t.text = std::move(val);
    set_pos(t, start);
    out_.push_back(std::move(t));
    pos_ = p + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText: return "template data";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kName: return "'" + t.text + "'";
    case Tok::kString: return "a string";
    case Tok::kInt:
    case Tok::kFloat: return "'" + t.text + "'";
    case Tok::kOp: return "'" + t.text + "'";
    case Tok::kEof: return "end of template";
  }
  return "token";
}

}  // namespace tern::text::jinja
