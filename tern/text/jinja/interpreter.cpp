// Statement execution and expression evaluation for the Jinja interpreter.
#include "tern/text/jinja/interpreter.h"

#include "tern/base/error.h"
#include "tern/text/jinja/builtins.h"

namespace tern::text::jinja {

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

void Interpreter::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) failf("expected at most {} evaluation steps, got more (template too expensive)", limits_.max_steps);
}

void Interpreter::check_size(size_t bytes) {
  if (bytes > limits_.max_output_bytes)
    failf("expected output and values of at most {} bytes, got {}", limits_.max_output_bytes, bytes);
  charge(static_cast<int64_t>(bytes / 16));
}

void Interpreter::append(std::string& out, const std::string& s) {
  check_size(out.size() + s.size());
  out += s;
}

void Interpreter::render(const Body& body, std::string& out) {
  SizeCap cap(limits_.max_output_bytes);
  exec(body, out);
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

std::string Interpreter::render_scoped(const Body& body) {
  std::string out;
  auto saved = frame_;
  frame_ = std::make_shared<Frame>(Frame{saved, {}});
  try {
    exec(body, out);
  } catch (...) {
    frame_ = saved;
    throw;
  }
  frame_ = saved;
  return out;
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
  for (const auto& f : filters) {
    CallArgs args;
    eval_args(*f, 1, args);
    v = apply_filter(*this, f->name, v, args);
  }
  return v;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  line_ = s.line;
  charge(1);
  switch (s.kind) {
    case StmtKind::kText: append(out, s.text); break;
    case StmtKind::kOutput: {
      Value v = eval(*s.expr);
      append(out, to_str(v));
      break;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (truthy(eval(*cond))) return exec(body, out);
      }
      return exec(s.else_body, out);
    case StmtKind::kFor: exec_for(s, out); break;
    case StmtKind::kSet: assign(s.target, eval(*s.expr)); break;
    case StmtKind::kSetBlock: assign(s.target, apply_filters(s.filters, Value::string(render_scoped(s.body)))); break;
    case StmtKind::kMacro: frame_->vars[s.name] = make_macro(s, s.name); break;
    case StmtKind::kCallBlock: exec_call_block(s, out); break;
    case StmtKind::kFilterBlock: append(out, to_str(apply_filters(s.filters, Value::string(render_scoped(s.body))))); break;
    case StmtKind::kWith: {
      auto scope = std::make_shared<Frame>(Frame{frame_, {}});
      for (const auto& [name, e] : s.assigns) scope->vars[name] = eval(*e);
      auto saved = frame_;
      frame_ = scope;
      try {
        Flow f = exec(s.body, out);
        frame_ = saved;
        return f;
      } catch (...) {
        frame_ = saved;
        throw;
      }
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return exec(s.body, out);
  }
  return Flow::kNormal;
}

void Interpreter::assign(const Target& t, Value v) {
  if (!t.attr.empty()) {
    const Value* ns = frame_->find(t.name);
    if (!ns || !ns->is_namespace()) failf("cannot assign attribute on non-namespace object '{}'", t.name);
    ns->ns().attrs.set(Value::string(t.attr), std::move(v));
    return;
  }
  if (!t.names.empty()) {
    std::vector<Value> items = iterate(v);
    if (items.size() != t.names.size())
      failf("expected {} values to unpack, got {}", t.names.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) frame_->vars[t.names[i]] = std::move(items[i]);
    return;
  }
  frame_->vars[t.name] = std::move(v);
}

void Interpreter::exec_for(const Stmt& s, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr));
  auto saved = frame_;
  auto restore = [&] { frame_ = saved; };
  try {
    if (s.cond) {
      std::vector<Value> kept;
      for (auto& item : items) {
        charge(1);
        frame_ = std::make_shared<Frame>(Frame{saved, {}});
        assign(s.target, item);
        if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
      }
      restore();
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, out);
      return;
    }
    auto n = static_cast<int64_t>(items.size());
    auto cycle_items = std::make_shared<int64_t>(0);
    for (int64_t i = 0; i < n; ++i) {
      charge(1);
      frame_ = std::make_shared<Frame>(Frame{saved, {}});
      DictData loop;
      loop.set(Value::string("index"), Value::integer(i + 1));
      loop.set(Value::string("index0"), Value::integer(i));
      loop.set(Value::string("revindex"), Value::integer(n - i));
      loop.set(Value::string("revindex0"), Value::integer(n - i - 1));
      loop.set(Value::string("first"), Value::boolean(i == 0));
      loop.set(Value::string("last"), Value::boolean(i == n - 1));
      loop.set(Value::string("length"), Value::integer(n));
      loop.set(Value::string("depth"), Value::integer(1));
      loop.set(Value::string("depth0"), Value::integer(0));
      if (i > 0) loop.set(Value::string("previtem"), items[i - 1]);
      if (i + 1 < n) loop.set(Value::string("nextitem"), items[i + 1]);
      loop.set(Value::string("cycle"), Value::make_callable("loop.cycle", [i](Interpreter&, CallArgs& a) {
                 if (a.args.empty()) fail("no items for cycling given");
                 return a.args[static_cast<size_t>(i) % a.args.size()];
               }));
      frame_->vars["loop"] = Value::make_dict(std::move(loop));
      assign(s.target, items[i]);
      Flow f = exec(s.body, out);
      if (f == Flow::kBreak) break;
    }
    restore();
  } catch (...) {
    restore();
    throw;
  }
}

Value Interpreter::make_macro(const Stmt& s, const std::string& name) {
  std::weak_ptr<Frame> closure = frame_;
  const Stmt* stmt = &s;
  return Value::make_callable(name, [stmt, closure](Interpreter& in, CallArgs& args) {
    return in.call_macro(*stmt, closure.lock(), args);
  });
}

Value Interpreter::call_macro(const Stmt& s, const std::shared_ptr<Frame>& closure, CallArgs& args) {
  if (depth_ >= limits_.max_depth) failf("expected macro calls nested at most {} deep, got deeper", limits_.max_depth);
  auto scope = std::make_shared<Frame>(Frame{closure ? closure : root_, {}});
  std::vector<bool> used(args.kwargs.size(), false);
  auto saved = frame_;
  int saved_line = line_;
  ++depth_;
  frame_ = scope;
  std::string out;
  try {
    for (size_t i = 0; i < s.params.size(); ++i) {
      const auto& p = s.params[i];
      const Value* given = i < args.args.size() ? &args.args[i] : nullptr;
      for (size_t k = 0; !given && k < args.kwargs.size(); ++k) {
        if (args.kwargs[k].first == p.name) {
          given = &args.kwargs[k].second;
          used[k] = true;
        }
      }
      if (given) {
        scope->vars[p.name] = *given;
      } else if (p.default_value) {
        scope->vars[p.name] = eval(*p.default_value);
      } else {
        scope->vars[p.name] = Value::undefined(fmt::format("parameter '{}' was not provided", p.name));
      }
    }
    std::vector<Value> varargs;
    for (size_t i = s.params.size(); i < args.args.size(); ++i) varargs.push_back(args.args[i]);
    DictData kwargs;
    for (size_t k = 0; k < args.kwargs.size(); ++k) {
      if (used[k]) continue;
      if (args.kwargs[k].first == "caller") {
        scope->vars["caller"] = args.kwargs[k].second;
      } else {
        kwargs.set(Value::string(args.kwargs[k].first), args.kwargs[k].second);
      }
    }
    scope->vars["varargs"] = Value::make_list(std::move(varargs));
    scope->vars["kwargs"] = Value::make_dict(std::move(kwargs));
    exec(s.body, out);
  } catch (...) {
    frame_ = saved;
    --depth_;
    throw;
  }
  frame_ = saved;
  --depth_;
  line_ = saved_line;
  return Value::string(std::move(out));
}

void Interpreter::exec_call_block(const Stmt& s, std::string& out) {
  Value caller = make_macro(s, "caller");
  append(out, to_str(eval_call(*s.expr, &caller)));
}

Value Interpreter::lookup(const std::string& name) const {
  if (const Value* v = frame_->find(name)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Interpreter::eval_args(const Expr& e, size_t first, CallArgs& out) {
  for (size_t i = first; i < e.items.size(); ++i) out.args.push_back(eval(*e.items[i]));
  for (const auto& [k, x] : e.kwargs) out.kwargs.emplace_back(k, eval(*x));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_callable()) {
    NativeFn f = fn.callable().fn;  // keep the callable alive while it runs
    return f(*this, args);
  }
  if (fn.is_undefined()) fail_undefined(fn);
  failf("'{}' object is not callable", type_name(fn));
}

Value Interpreter::eval_call(const Expr& e, const Value* caller) {
  Value fn = eval(*e.items[0]);
  CallArgs args;
  eval_args(e, 1, args);
  if (caller) args.kwargs.emplace_back("caller", *caller);
  return call(fn, args);
}

}  // namespace tern::text::jinja
