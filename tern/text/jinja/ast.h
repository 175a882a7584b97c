// The Jinja syntax tree: expressions and statements produced by the parser, walked by the interpreter.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tern/text/jinja/value.h"

namespace tern::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // items: key0, value0, key1, value1, ...
  kGetAttr,   // items[0].name
  kGetItem,   // items[0][items[1]]
  kSlice,     // items[0][items[1]:items[2]:items[3]] (null items for absent bounds)
  kCall,      // items[0](items[1..], kwargs)
  kFilter,    // items[0] | name(items[1..], kwargs)
  kTest,      // items[0] is [not] name(items[1..], kwargs); negated
  kUnary,     // op items[0]: "not", "-", "+"
  kBinary,    // items[0] op items[1]: + - * / // % ** ~ and or in "not in"
  kCompare,   // items[0] ops[0] items[1] ops[1] items[2] ... (chained)
  kCond,      // items[1] if items[0] else items[2] (items[2] null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                   // kLiteral
  std::string name;              // name, attribute, filter/test name or operator
  std::vector<ExprPtr> items;    // children, see ExprKind
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
  bool negated = false;          // kTest

  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Frees the subtree from a worklist, not by recursion: the parser builds left-nested chains (a ~ b ~ c,
  // x.a.b, x|f|g) as long as the template, which a recursive release would follow down the C++ stack.
  ~Expr();
};

// An assignment target: a name, ns.attr, or a tuple of names.
struct Target {
  std::string name;                // "" for a tuple
  std::string attr;                // set for ns.attr
  std::vector<std::string> names;  // tuple unpacking
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

enum class StmtKind {
  kText,       // text
  kOutput,     // expr
  kIf,         // branches: (cond, body)...; else_body
  kFor,        // target in expr [if cond]: body [else else_body]
  kSet,        // target = expr
  kSetBlock,   // target = rendered body, passed through filters
  kMacro,      // name(params): body
  kCallBlock,  // expr (a call) with caller(params) = body
  kFilterBlock,  // rendered body passed through filters
  kWith,       // assigns (target names, exprs); body
  kBreak,
  kContinue,
  kScope,      // body rendered in place (e.g. HF's {% generation %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<std::string, ExprPtr>> assigns;
  std::vector<ExprPtr> filters;  // kFilter nodes whose items[0] is null: applied to the rendered body
};

}  // namespace tern::text::jinja
