// The Jinja parser: tokens -> statement tree, following Jinja2's grammar and operator precedence.
#pragma once
#include <string>
#include <vector>

#include "tern/text/jinja/ast.h"
#include "tern/text/jinja/lexer.h"

namespace tern::text::jinja {

// Parses a whole template. Throws tern::Error "[template] line L col C: expected X, got Y" on
// syntax errors, unsupported tags (include, extends, ...) and nesting deeper than max_depth.
Body parse_template(const std::string& source, int max_depth = 200);

// Recursive-descent parser state; statements live in parser.cpp, expressions in parser_expr.cpp.
class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : toks_(std::move(tokens)), max_depth_(max_depth) {}
  Body parse_all();

 private:
  // statements
  Body parse_body(const std::vector<std::string>& end_names);
  StmtPtr parse_statement();
  StmtPtr parse_for(int line);
  StmtPtr parse_if(int line);
  StmtPtr parse_set(int line);
  StmtPtr parse_macro(int line);
  StmtPtr parse_call_block(int line);
  StmtPtr parse_filter_block(int line);
  StmtPtr parse_with(int line);
  Target parse_target(bool allow_attr);
  std::vector<MacroParam> parse_params();
  void parse_filter_chain(std::vector<ExprPtr>& out);
  void expect_block_end();
  void expect_end_tag(const std::string& name);

  // expressions
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee);  // callee(args...)
  void parse_call_args(Expr& call);
  ExprPtr make(ExprKind kind, int line);
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b);

  // token helpers
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const;
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  std::string expect_name();
  bool at_tuple_end() const;
  [[noreturn]] void error(const std::string& expected) const;
  [[noreturn]] void error_at(const Token& t, const std::string& msg) const;

  // Bounds recursion so hostile input cannot exhaust the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser);
    ~DepthGuard() { --p.depth_; }
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace tern::text::jinja
