// PCRE2 wrapper: compile with UTF/UCP and JIT, iterate matches with Oniguruma's empty-match rule.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tern/text/regex.h"

#include <pcre2.h>

#include <string>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

// Oniguruma's \s is Unicode White_Space; PCRE2's also matches U+180E.
constexpr std::string_view kSpaceBody =
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
// Oniguruma's \w is Alphabetic, marks, decimal digits, connector punctuation and joiners.
constexpr std::string_view kWordBody = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread JIT stack, so patterns with deep backtracking do not fail on the 32 KiB default.
struct JitState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  JitState() {
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    if (stack && ctx) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~JitState() {
    if (ctx) pcre2_match_context_free(ctx);
    if (stack) pcre2_jit_stack_free(stack);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local JitState state;
  return state.ctx;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

std::string translate_onig_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      std::string_view body = (e == 's' || e == 'S') ? kSpaceBody : (e == 'w' || e == 'W') ? kWordBody : "";
      bool negated = e == 'S' || e == 'W';
      if (!body.empty() && !(in_class && negated)) {
        if (in_class) {
          out += body;
        } else {
          out += negated ? "[^" : "[";
          out += body;
          out += ']';
        }
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

namespace {

std::shared_ptr<Regex::Code> compile(std::string_view pattern, uint32_t extra, std::string_view shown) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | extra, &err, &off, nullptr);
  TERN_CHECK(code, "[tokenizer] expected a valid regex, got '{}': {} at offset {}", shown, pcre2_message(err), off);
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT support the interpreter runs the pattern
  auto c = std::make_shared<Regex::Code>();
  c->code = code;
  return c;
}

}  // namespace

Regex Regex::pattern(std::string_view pattern) {
  Regex r;
  r.code_ = compile(translate_onig_pattern(pattern), PCRE2_UCP, pattern);
  return r;
}

Regex Regex::literal(std::string_view s) {
  Regex r;
  r.code_ = compile(s, PCRE2_LITERAL, s);
  return r;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  TERN_CHECK(md, "[tokenizer] expected memory for regex match data, got none");
  pcre2_match_context* ctx = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, md, ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      TERN_THROW("[tokenizer] expected a regex match to finish, got PCRE2 error: {}", pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_match_end == e) {
      last_end += last_end < text.size() ? utf8_len(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    last_match_end = e;
    have_last = true;
    out.emplace_back(s, e);
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace tern::text
