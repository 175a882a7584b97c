// The Jinja interpreter: renders a parsed template against variables, with Jinja2's scoping
// (loop bodies and macros get their own frames), loop controls and resource limits.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "tern/text/jinja/ast.h"
#include "tern/text/jinja/value.h"

namespace tern::text::jinja {

// Bounds on one render, so a hostile template can neither hang nor exhaust memory.
struct Limits {
  int max_depth = 200;                      // syntax nesting, and macro calls in flight
  int64_t max_steps = 20'000'000;           // evaluated nodes + loop iterations + produced bytes / 16
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string or list built
};

// One variable scope; lookups fall back to the parent.
struct Frame {
  std::shared_ptr<Frame> parent;
  std::unordered_map<std::string, Value> vars;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, std::shared_ptr<Frame> root) : limits_(limits), root_(root), frame_(std::move(root)) {}

  // Renders body into out. Throws RenderError (runtime errors) or tern::Error (raise_exception).
  void render(const Body& body, std::string& out);

  Value eval(const Expr& e);
  // Calls a callable value; fails for anything else.
  Value call(const Value& fn, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);

  // Accounts for work done and checks sizes against the limits (fails with a clear message).
  void charge(int64_t steps);
  void check_size(size_t bytes);
  const Limits& limits() const { return limits_; }
  // The template line being evaluated, for error messages.
  int line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void exec_call_block(const Stmt& s, std::string& out);
  void assign(const Target& t, Value v);
  std::string render_scoped(const Body& body);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v);
  Value make_macro(const Stmt& s, const std::string& name);
  Value call_macro(const Stmt& s, const std::shared_ptr<Frame>& closure, CallArgs& args);
  Value eval_call(const Expr& e, const Value* caller);
  void eval_args(const Expr& e, size_t first, CallArgs& out);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Value lookup(const std::string& name) const;
  void append(std::string& out, const std::string& s);

  Limits limits_;
  std::shared_ptr<Frame> root_;
  std::shared_ptr<Frame> frame_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
};

// Python-semantics operators (operators.cpp): + - * / // % ** and `in`.
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace tern::text::jinja
