// The Jinja lexer: splits a template into text and tag tokens, applying Jinja's whitespace control
// ({%- -%}, {{- -}}, {%+) with trim_blocks and lstrip_blocks on, as Hugging Face configures it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tern::text::jinja {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // text data, name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, col = 1;
};

// Tokenizes a whole template (newlines normalized to \n, one trailing newline dropped, as Jinja's
// keep_trailing_newline=False). Throws tern::Error "[template] line L col C: ..." on bad input.
std::vector<Token> lex(const std::string& source);

// Human-readable token description for "expected X, got Y" messages.
std::string describe(const Token& t);

}  // namespace tern::text::jinja
