// Jinja expression parsing with Jinja2's precedence: condexpr < or < and < not < compare < + - <
// ~ < * / // % < ** < unary, then postfix (. [] ()), filters (|) and tests (is).
#include "tern/base/error.h"
#include "tern/text/jinja/parser.h"

namespace tern::text::jinja {

ExprPtr Parser::make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr Parser::binary(const std::string& op, ExprPtr a, ExprPtr b) {
  auto e = make(ExprKind::kBinary, a->line);
  e->name = op;
  e->items.push_back(std::move(a));
  e->items.push_back(std::move(b));
  return e;
}

bool Parser::at_tuple_end() const {
  const Token& t = cur();
  return t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof ||
         (t.type == Tok::kOp && t.text == ")");
}

ExprPtr Parser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (at_tuple_end()) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) error("an expression");
  }
  auto e = make(ExprKind::kTuple, line);
  e->items = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  if (!with_condexpr) return parse_or();
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    int line = cur().line;
    ++pos_;
    ExprPtr cond = parse_or();
    ExprPtr other;
    if (skip_name("else")) other = parse_expression(true);
    auto e = make(ExprKind::kCond, line);
    e->items.push_back(std::move(cond));
    e->items.push_back(std::move(expr));
    e->items.push_back(std::move(other));
    expr = std::move(e);
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (skip_name("or")) left = binary("or", std::move(left), parse_and());
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (skip_name("and")) left = binary("and", std::move(left), parse_not());
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = make(ExprKind::kUnary, cur().line);
    ++pos_;
    e->name = "not";
    e->items.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      ++pos_;
    } else if (is_name("in")) {
      op = "in";
      ++pos_;
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = "not in";
      pos_ += 2;
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::kCompare, first->line);
      cmp->items.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = toks_[pos_++].text;
    left = binary(op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = toks_[pos_++].text;
    left = binary(op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    node = make(ExprKind::kUnary, cur().line);
    node->name = toks_[pos_++].text;
    node->items.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  int line = t.line;
  switch (t.type) {
    case Tok::kName: {
      ++pos_;
      auto e = make(ExprKind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      return e;
    }
    case Tok::kString: {
      std::string s;
      while (cur().type == Tok::kString) s += toks_[pos_++].text;
      auto e = make(ExprKind::kLiteral, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    case Tok::kInt: {
      auto e = make(ExprKind::kLiteral, line);
      e->value = Value::integer(t.int_value);
      ++pos_;
      return e;
    }
    case Tok::kFloat: {
      auto e = make(ExprKind::kLiteral, line);
      e->value = Value::number(t.float_value);
      ++pos_;
      return e;
    }
    case Tok::kOp:
      if (t.text == "(") {
        ++pos_;
        ExprPtr e = parse_tuple(true, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        ++pos_;
        auto e = make(ExprKind::kList, line);
        while (!is_op("]")) {
          if (!e->items.empty()) expect_op(",");
          if (is_op("]")) break;
          e->items.push_back(parse_expression());
        }
        expect_op("]");
        return e;
      }
      if (t.text == "{") {
        ++pos_;
        auto e = make(ExprKind::kDict, line);
        while (!is_op("}")) {
          if (!e->items.empty()) expect_op(",");
          if (is_op("}")) break;
          e->items.push_back(parse_expression());
          expect_op(":");
          e->items.push_back(parse_expression());
        }
        expect_op("}");
        return e;
      }
      break;
    default:
      break;
  }
  error("an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".")) {
      int line = cur().line;
      ++pos_;
      if (cur().type == Tok::kName) {
        auto e = make(ExprKind::kGetAttr, line);
        e->name = toks_[pos_++].text;
        e->items.push_back(std::move(node));
        node = std::move(e);
      } else if (cur().type == Tok::kInt) {
        auto e = make(ExprKind::kGetItem, line);
        auto idx = make(ExprKind::kLiteral, line);
        idx->value = Value::integer(toks_[pos_++].int_value);
        e->items.push_back(std::move(node));
        e->items.push_back(std::move(idx));
        node = std::move(e);
      } else {
        error("an attribute name");
      }
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  int line = cur().line;
  expect_op("[");
  ExprPtr parts[3];
  bool is_slice = false;
  if (!is_op(":")) parts[0] = parse_expression();
  if (skip_op(":")) {
    is_slice = true;
    if (!is_op("]") && !is_op(":")) parts[1] = parse_expression();
    if (skip_op(":") && !is_op("]")) parts[2] = parse_expression();
  }
  expect_op("]");
  auto e = make(is_slice ? ExprKind::kSlice : ExprKind::kGetItem, line);
  e->items.push_back(std::move(node));
  for (int i = 0; i < (is_slice ? 3 : 1); ++i) e->items.push_back(std::move(parts[i]));
  return e;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = make(ExprKind::kCall, cur().line);
  e->items.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) error_at(cur(), "expected an argument, got '*' (argument unpacking is not supported)");
    if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
      std::string key = toks_[pos_].text;
      pos_ += 2;
      call.kwargs.emplace_back(key, parse_expression());
    } else {
      if (!call.kwargs.empty()) error("a keyword argument (positional after keyword)");
      call.items.push_back(parse_expression());
    }
  }
  expect_op(")");
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (skip_op("|")) {
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      ++pos_;
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr node) {
  auto e = make(ExprKind::kFilter, cur().line);
  e->name = expect_name();
  while (skip_op(".")) {
    e->name += '.';
    e->name += expect_name();
  }
  e->items.push_back(std::move(node));
  if (is_op("(")) parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  auto e = make(ExprKind::kTest, cur().line);
  e->negated = skip_name("not");
  e->name = expect_name();
  while (skip_op(".")) {
    e->name += '.';
    e->name += expect_name();
  }
  e->items.push_back(std::move(node));
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat ||
              is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error_at(t, "expected one test, got chained 'is' tests");
    e->items.push_back(parse_postfix(parse_primary()));
  }
  return e;
}

}  // namespace tern::text::jinja
