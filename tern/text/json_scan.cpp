// Minimal JSON scanning for the vocab / merges of tokenizer.json: strings with every escape,
// integers, and skipping of arbitrary values.
#include "tern/text/json_scan.h"

#include <cstring>
#include <string>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

struct Scanner {
  std::string_view s;
  size_t i = 0;
  const JsonPath& p;

  [[noreturn]] void fail(const char* what) const {
    p.fail(what, fmt::format("something else at byte {} of the value", i));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c, const char* what) {
    if (!eat(c)) fail(what);
  }
  int hex4() {
    if (i + 4 > s.size()) fail("a \\u escape with 4 hex digits");
    int v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[i++];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail("a \\u escape with 4 hex digits");
      v = v * 16 + d;
    }
    return v;
  }
  // Reads a string at s[i] (after whitespace) into out; returns a view of out or of the input.
  std::string_view string(std::string& out) {
    ws();
    if (i >= s.size() || s[i] != '"') fail("a string");
    ++i;
    size_t start = i;
    while (i < s.size() && s[i] != '"' && s[i] != '\\') ++i;
    if (i < s.size() && s[i] == '"') return s.substr(start, i++ - start);  // no escapes: a view
    out.assign(s.substr(start, i - start));
    while (true) {
      if (i >= s.size()) fail("a closing quote");
      char c = s[i++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) fail("an escape");
      char e = s[i++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          char32_t cp = static_cast<char32_t>(hex4());
          if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            size_t save = i;
            i += 2;
            int lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<char32_t>(lo) - 0xDC00);
            else
              i = save;
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = kReplacementChar;  // a lone surrogate
          append_utf8(out, cp);
          break;
        }
        default: fail("a valid escape");
      }
    }
  }
  int64_t integer() {
    ws();
    size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    int64_t v = 0;
    size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 18) {
      v = v * 10 + (s[i++] - '0');
      ++digits;
    }
    if (digits == 0 || (i < s.size() && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9'))))
      fail("an integer");
    return s[start] == '-' ? -v : v;
  }
  // Skips any JSON value.
  void skip_value() {
    ws();
    if (i >= s.size()) fail("a value");
    char c = s[i];
    if (c == '"') {
      std::string tmp;
      string(tmp);
      return;
    }
    if (c == '{' || c == '[') {
      int depth = 0;
      while (i < s.size()) {
        char d = s[i];
        if (d == '"') {
          std::string tmp;
          string(tmp);
          continue;
        }
        ++i;
        if (d == '{' || d == '[') ++depth;
        if (d == '}' || d == ']') {
          if (--depth == 0) return;
        }
      }
      fail("a closed object or array");
    }
    while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' && s[i] != '\r' &&
           s[i] != '\t')
      ++i;
  }
};

}  // namespace

std::optional<TokenizerJsonParts> split_tokenizer_json(std::string_view text, const JsonPath& p) {
  Scanner sc{text, 0, p};
  size_t vocab_b = 0, vocab_e = 0, merges_b = 0, merges_e = 0;
  try {
    if (!sc.eat('{')) return std::nullopt;
    std::string key;
    bool first = true;
    while (!sc.eat('}')) {
      if (!first && !sc.eat(',')) return std::nullopt;
      first = false;
      if (sc.string(key) != "model") {
        if (!sc.eat(':')) return std::nullopt;
        sc.skip_value();
        continue;
      }
      if (!sc.eat(':') || !sc.eat('{')) return std::nullopt;
      bool mfirst = true;
      while (!sc.eat('}')) {
        if (!mfirst && !sc.eat(',')) return std::nullopt;
        mfirst = false;
        std::string mkey_buf;
        std::string mkey(sc.string(mkey_buf));
        if (!sc.eat(':')) return std::nullopt;
        sc.ws();
        size_t b = sc.i;
        sc.skip_value();
        if (mkey == "vocab") vocab_b = b, vocab_e = sc.i;
        if (mkey == "merges") merges_b = b, merges_e = sc.i;
      }
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  if (vocab_e == 0 || merges_e == 0 || text[vocab_b] != '{' || text[merges_b] != '[') return std::nullopt;
  std::string rest;
  rest.reserve(text.size() - (vocab_e - vocab_b) - (merges_e - merges_b) + 4);
  bool vocab_first = vocab_b < merges_b;
  size_t b1 = vocab_first ? vocab_b : merges_b, e1 = vocab_first ? vocab_e : merges_e;
  size_t b2 = vocab_first ? merges_b : vocab_b, e2 = vocab_first ? merges_e : vocab_e;
  rest.append(text.substr(0, b1));
  rest += vocab_first ? "{}" : "[]";
  rest.append(text.substr(e1, b2 - e1));
  rest += vocab_first ? "[]" : "{}";
  rest.append(text.substr(e2));
  TokenizerJsonParts parts;
  try {
    parts.doc = parse_json(rest, p.file);
  } catch (const Error&) {  // the caller's whole-document parse reports it
    return std::nullopt;
  }
  parts.vocab = text.substr(vocab_b, vocab_e - vocab_b);
  parts.merges = text.substr(merges_b, merges_e - merges_b);
  return parts;
}

void scan_vocab(std::string_view raw, const JsonPath& p, const std::function<void(std::string_view, int64_t)>& fn) {
  Scanner sc{raw, 0, p};
  sc.expect('{', "an object of token -> id");
  std::string buf;
  bool first = true;
  while (!sc.eat('}')) {
    if (!first) sc.expect(',', "',' or '}'");
    first = false;
    std::string_view key = sc.string(buf);
    // Tokens are copied as they stand and decode() returns them: they must be UTF-8, as JSON requires
    // (the merges name vocab tokens, so checking these is enough).
    if (!is_valid_utf8(key)) p.fail("UTF-8 tokens", fmt::format("ill-formed UTF-8 at byte {} of the value", sc.i));
    sc.expect(':', "':'");
    sc.ws();
    if (sc.i >= raw.size() || !((raw[sc.i] >= '0' && raw[sc.i] <= '9') || raw[sc.i] == '-'))
      (p / key).fail("a non-negative integer id", "another value");
    fn(key, sc.integer());
  }
}

void scan_merges(std::string_view raw, const JsonPath& p,
                 const std::function<void(std::string_view, std::string_view)>& fn) {
  Scanner sc{raw, 0, p};
  sc.expect('[', "an array of merges");
  std::string buf_a, buf_b;
  bool first = true;
  while (!sc.eat(']')) {
    if (!first) sc.expect(',', "',' or ']'");
    first = false;
    if (sc.eat('[')) {
      std::string_view a = sc.string(buf_a);
      sc.expect(',', "a merge pair [\"a\", \"b\"]");
      std::string_view b = sc.string(buf_b);
      sc.expect(']', "a merge pair [\"a\", \"b\"]");
      fn(a, b);
    } else {
      std::string_view m = sc.string(buf_a);
      size_t sp = m.find(' ');
      if (sp == std::string_view::npos) p.fail("a merge \"a b\"", "'" + std::string(m) + "'");
      fn(m.substr(0, sp), m.substr(sp + 1));
    }
  }
}

}  // namespace tern::text
