// Expression evaluation: names, literals, attribute and item access, slices, calls, filters,
// tests, boolean logic, comparisons and the inline if.
#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/interpreter.h"

namespace tern::text::jinja {

namespace {

// Jinja's "'dict object' has no attribute 'x'" spelling of a missing attribute.
std::string object_name(const Value& v) {
  if (v.is_none()) return "None";
  return fmt::format("'{} object'", type_name(v));
}

// Bounds eval() recursion; the parser already bounds syntax depth, this covers everything else.
struct EvalDepth {
  int& d;
  explicit EvalDepth(int& depth, int max) : d(depth) {
    if (++d > max * 4) {
      --d;
      fail("expected expressions nested less deeply, got too deep an evaluation");
    }
  }
  ~EvalDepth() { --d; }
};

}  // namespace

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_namespace()) {
    if (const Value* v = obj.ns().attrs.find(Value::string(name))) return *v;
  } else {
    if (auto m = find_method(obj, name)) return *m;
    if (obj.is_dict()) {
      if (const Value* v = obj.dict().find(Value::string(name))) return *v;
    }
  }
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_name(obj), name));
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    // Jinja turns any failed lookup, unhashable keys included, into an undefined value.
    bool hashable = !(key.is_list() && !key.list().tuple) && !key.is_dict() && !key.is_namespace();
    if (const Value* v = hashable ? obj.dict().find(key) : nullptr) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = to_int64(key);
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.list().items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.list().items[static_cast<size_t>(i)];
    } else {
      Value s = slice(*this, obj, Value::integer(i), Value::integer(i == -1 || i == INT64_MAX ? INT64_MAX : i + 1), Value::none());
      if (!s.str().empty()) return s;
    }
    return Value::undefined(fmt::format("{} has no element {}", object_name(obj), i));
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(fmt::format("{} has no element {}", object_name(obj), repr(key)));
}

Value Interpreter::eval(const Expr& e) {
  EvalDepth guard(depth_, limits_.max_depth);
  line_ = e.line;
  charge(1);
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x));
      return Value::make_list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        d.set(k, eval(*e.items[i + 1]));
      }
      return Value::make_dict(std::move(d));
    }
    case ExprKind::kGetAttr: return getattr(eval(*e.items[0]), e.name);
    case ExprKind::kGetItem: {
      Value obj = eval(*e.items[0]);
      return getitem(obj, eval(*e.items[1]));
    }
    case ExprKind::kSlice: return eval_slice(e);
    case ExprKind::kCall: return eval_call(e, nullptr);
    case ExprKind::kFilter: {
      Value input = eval(*e.items[0]);
      CallArgs args;
      eval_args(e, 1, args);
      line_ = e.line;
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::kTest: {
      Value input = eval(*e.items[0]);
      CallArgs args;
      eval_args(e, 1, args);
      line_ = e.line;
      return Value::boolean(apply_test(*this, e.name, input, args) != e.negated);
    }
    case ExprKind::kUnary: {
      Value v = eval(*e.items[0]);
      if (e.name == "not") return Value::boolean(!truthy(v));
      if (v.is_undefined()) fail_undefined(v);
      if (e.name == "-") {
        if (v.is_float()) return Value::number(-v.as_float());
        int64_t i = to_int64(v);
        if (i == INT64_MIN) fail("integer overflow");
        return Value::integer(-i);
      }
      if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
      if (!v.is_number()) failf("bad operand type for unary +: '{}'", type_name(v));
      return v;
    }
    case ExprKind::kBinary: return eval_binary(e);
    case ExprKind::kCompare: return eval_compare(e);
    case ExprKind::kCond: {
      if (truthy(eval(*e.items[0]))) return eval(*e.items[1]);
      if (e.items[2]) return eval(*e.items[2]);
      return Value::undefined(
          fmt::format("the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
    }
  }
  return Value::none();
}

Value Interpreter::eval_binary(const Expr& e) {
  Value a = eval(*e.items[0]);
  if (e.name == "and") return truthy(a) ? eval(*e.items[1]) : a;
  if (e.name == "or") return truthy(a) ? a : eval(*e.items[1]);
  Value b = eval(*e.items[1]);
  line_ = e.line;
  if (e.name == "~") {
    std::string s = to_str(a);
    std::string t = to_str(b);
    check_size(s.size() + t.size());
    return Value::string(s + t);
  }
  return binary_op(*this, e.name, a, b);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.items[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1]);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "in") {
      r = contains(right, left);
    } else if (op == "not in") {
      r = !contains(right, left);
    } else {
      int c = compare(left, right);
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_slice(const Expr& e) {
  Value obj = eval(*e.items[0]);
  Value parts[3];
  for (int i = 0; i < 3; ++i) parts[i] = e.items[i + 1] ? eval(*e.items[i + 1]) : Value::none();
  line_ = e.line;
  return slice(*this, obj, parts[0], parts[1], parts[2]);
}

}  // namespace tern::text::jinja
