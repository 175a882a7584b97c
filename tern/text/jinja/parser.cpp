// Jinja statement parsing: text, {{ output }}, and the tags chat templates use (if, for, set,
// macro, call, filter, with, break/continue, HF's generation).
#include "tern/text/jinja/parser.h"

#include "tern/base/error.h"

namespace tern::text::jinja {

Body parse_template(const std::string& source, int max_depth) { return Parser(lex(source), max_depth).parse_all(); }

Parser::DepthGuard::DepthGuard(Parser& parser) : p(parser) {
  if (++p.depth_ > p.max_depth_) {
    --p.depth_;
    p.error_at(p.cur(), fmt::format("expected nesting depth <= {}, got deeper", p.max_depth_));
  }
}

const Token& Parser::peek(size_t ahead) const {
  size_t i = pos_ + ahead;
  return i < toks_.size() ? toks_[i] : toks_.back();
}

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  ++pos_;
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!is_name(name)) return false;
  ++pos_;
  return true;
}

void Parser::expect_op(const char* op) {
  if (!skip_op(op)) error(fmt::format("'{}'", op));
}

std::string Parser::expect_name() {
  if (cur().type != Tok::kName) error("a name");
  return toks_[pos_++].text;
}

void Parser::error(const std::string& expected) const {
  error_at(cur(), fmt::format("expected {}, got {}", expected, describe(cur())));
}

void Parser::error_at(const Token& t, const std::string& msg) const {
  TERN_THROW("[template] line {} col {}: {}", t.line, t.col, msg);
}

void Parser::expect_block_end() {
  if (cur().type != Tok::kBlockEnd) error("end of statement '%}'");
  ++pos_;
}

void Parser::expect_end_tag(const std::string& name) {
  // parse_body stopped on "{% name"; consume the name and the tag end.
  if (!(cur().type == Tok::kName && cur().text == name)) error("'" + name + "'");
  ++pos_;
  expect_block_end();
}

Body Parser::parse_all() {
  Body body = parse_body({});
  if (cur().type != Tok::kEof) error("end of template");
  return body;
}

Body Parser::parse_body(const std::vector<std::string>& end_names) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (!end_names.empty()) error("'" + end_names.front() + "' (the tag is not closed)");
      return body;
    }
    if (t.type == Tok::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      ++pos_;
    } else if (t.type == Tok::kVarBegin) {
      ++pos_;
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = t.line;
      s->expr = parse_tuple(true, false);
      if (cur().type != Tok::kVarEnd) error("end of print statement '}}'");
      ++pos_;
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      const Token& name = peek();
      if (name.type == Tok::kName) {
        for (const auto& e : end_names) {
          if (name.text == e) {
            ++pos_;  // leave the name for the caller
            return body;
          }
        }
      }
      ++pos_;
      body.push_back(parse_statement());
    } else {
      error("template data or a tag");
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Token& t = cur();
  if (t.type != Tok::kName) error("a statement name");
  std::string name = t.text;
  int line = t.line;
  if (name == "for") return ++pos_, parse_for(line);
  if (name == "if") return ++pos_, parse_if(line);
  if (name == "set") return ++pos_, parse_set(line);
  if (name == "macro") return ++pos_, parse_macro(line);
  if (name == "call") return ++pos_, parse_call_block(line);
  if (name == "filter") return ++pos_, parse_filter_block(line);
  if (name == "with") return ++pos_, parse_with(line);
  if (name == "break" || name == "continue" || name == "generation") {
    ++pos_;
    expect_block_end();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (name == "generation") {
      s->kind = StmtKind::kScope;
      s->body = parse_body({"endgeneration"});
      expect_end_tag("endgeneration");
    } else {
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    }
    return s;
  }
  static const char* const kUnsupported[] = {"include", "extends", "block", "import", "from", "autoescape", "do"};
  for (const char* u : kUnsupported)
    if (name == u) error_at(t, fmt::format("expected a supported tag, got '{}' (not supported in chat templates)", name));
  error_at(t, fmt::format("expected a statement (if, for, set, macro, ...), got unknown tag '{}'", name));
}

Target Parser::parse_target(bool allow_attr) {
  Target target;
  bool parens = skip_op("(");
  std::string first = expect_name();
  if (allow_attr && !parens && skip_op(".")) {
    target.name = first;
    target.attr = expect_name();
    return target;
  }
  if (is_op(",")) {
    target.names.push_back(first);
    while (skip_op(",")) {
      if (cur().type != Tok::kName) break;
      target.names.push_back(expect_name());
    }
  } else {
    target.name = first;
  }
  if (parens) expect_op(")");
  return target;
}

StmtPtr Parser::parse_for(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFor;
  s->line = line;
  s->target = parse_target(false);
  if (!skip_name("in")) error("'in'");
  s->expr = parse_tuple(false, false);
  if (skip_name("if")) s->cond = parse_expression();
  if (is_name("recursive")) error_at(cur(), "expected a plain for loop, got 'recursive' (not supported)");
  expect_block_end();
  s->body = parse_body({"endfor", "else"});
  if (skip_name("else")) {
    expect_block_end();
    s->else_body = parse_body({"endfor"});
  }
  expect_end_tag("endfor");
  return s;
}

StmtPtr Parser::parse_if(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kIf;
  s->line = line;
  while (true) {
    ExprPtr cond = parse_tuple(false, false);
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"});
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (skip_name("elif")) continue;
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = parse_body({"endif"});
    }
    break;
  }
  expect_end_tag("endif");
  return s;
}

void Parser::parse_filter_chain(std::vector<ExprPtr>& out) {
  do {
    ExprPtr f = parse_filter(nullptr);
    out.push_back(std::move(f));
  } while (skip_op("|"));
}

StmtPtr Parser::parse_set(int line) {
  auto s = std::make_unique<Stmt>();
  s->line = line;
  s->target = parse_target(true);
  if (skip_op("=")) {
    s->kind = StmtKind::kSet;
    s->expr = parse_tuple(true, false);
    expect_block_end();
    return s;
  }
  s->kind = StmtKind::kSetBlock;
  if (!s->target.names.empty()) error("'=' (a block set takes one name)");
  if (skip_op("|")) parse_filter_chain(s->filters);
  expect_block_end();
  s->body = parse_body({"endset"});
  expect_end_tag("endset");
  return s;
}

std::vector<MacroParam> Parser::parse_params() {
  std::vector<MacroParam> params;
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    if (is_op(")")) break;
    MacroParam p;
    p.name = expect_name();
    if (skip_op("=")) p.default_value = parse_expression();
    params.push_back(std::move(p));
  }
  expect_op(")");
  return params;
}

StmtPtr Parser::parse_macro(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kMacro;
  s->line = line;
  s->name = expect_name();
  s->params = parse_params();
  expect_block_end();
  s->body = parse_body({"endmacro"});
  ++pos_;
  if (cur().type == Tok::kName) ++pos_;  // {% endmacro name %}
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_call_block(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kCallBlock;
  s->line = line;
  if (is_op("(")) s->params = parse_params();
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::kCall) error_at(cur(), "expected a call after 'call', got another expression");
  expect_block_end();
  s->body = parse_body({"endcall"});
  expect_end_tag("endcall");
  return s;
}

StmtPtr Parser::parse_filter_block(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFilterBlock;
  s->line = line;
  parse_filter_chain(s->filters);
  expect_block_end();
  s->body = parse_body({"endfilter"});
  expect_end_tag("endfilter");
  return s;
}

StmtPtr Parser::parse_with(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kWith;
  s->line = line;
  while (cur().type != Tok::kBlockEnd) {
    if (!s->assigns.empty()) expect_op(",");
    std::string name = expect_name();
    expect_op("=");
    s->assigns.emplace_back(name, parse_expression());
  }
  expect_block_end();
  s->body = parse_body({"endwith"});
  expect_end_tag("endwith");
  return s;
}

}  // namespace tern::text::jinja
