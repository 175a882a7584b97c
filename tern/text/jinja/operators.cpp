// Python-semantics arithmetic (+ - * / // % **), membership (`in`) and slicing for Jinja values.
#include <cmath>
#include <limits>
#include <optional>

#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/interpreter.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  failf("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

[[noreturn]] void overflow() { fail("integer overflow (values beyond 64 bits are not supported)"); }

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::string("") : Value::make_list({}, seq.list().tuple);
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(n) > in.limits().max_output_bytes / s.size() + 1)
      in.check_size(in.limits().max_output_bytes + 1);
    in.check_size(s.size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.list().items;
  if (!items.empty() && static_cast<uint64_t>(n) > in.limits().max_output_bytes / items.size() + 1)
    in.check_size(in.limits().max_output_bytes + 1);
  in.check_size(items.size() * static_cast<size_t>(n) * sizeof(Value));
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::make_list(std::move(out), seq.list().tuple);
}

double float_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Value power(const Value& a, const Value& b) {
  if (a.is_float() || b.is_float() || to_int64(b) < 0) {
    double x = to_double(a), y = to_double(b);
    if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(x, y));
  }
  int64_t base = to_int64(a), exp = to_int64(b), r = 1;
  while (exp > 0) {
    if (exp & 1) r = checked_mul(r, base);
    exp >>= 1;
    if (exp > 0) base = checked_mul(base, base);
  }
  return Value::integer(r);
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value::integer(checked_add(to_int64(a), to_int64(b)));
    if (nums) return Value::number(to_double(a) + to_double(b));
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
      in.check_size((a.list().items.size() + b.list().items.size()) * sizeof(Value));
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::make_list(std::move(items), a.list().tuple);
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked_sub(to_int64(a), to_int64(b)));
    if (nums) return Value::number(to_double(a) - to_double(b));
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked_mul(to_int64(a), to_int64(b)));
    if (nums) return Value::number(to_double(a) * to_double(b));
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, to_int64(b));
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, to_int64(a));
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (to_double(b) == 0) fail("division by zero");
    return Value::number(to_double(a) / to_double(b));
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      std::string s = percent_format(a.str(), b);
      in.check_size(s.size());
      return Value::string(std::move(s));
    }
    if (!nums) unsupported(op, a, b);
    if (to_double(b) == 0) fail(op == "%" ? "modulo by zero" : "integer division or modulo by zero");
    if (ints) {
      int64_t x = to_int64(a), y = to_int64(b);
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    double x = to_double(a), y = to_double(b);
    double m = float_mod(x, y);
    return Value::number(op == "%" ? m : std::floor((x - m) / y + 0.5));
  }
  if (op == "**") {
    if (!nums) unsupported(op, a, b);
    return power(a, b);
  }
  failf("unknown operator '{}'", op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is_string()) failf("'in <string>' requires string as left operand, not {}", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const auto& x : container.list().items)
        if (equals(x, item)) return true;
      return false;
    case Kind::kDict:
      if (item.is_list() && !item.list().tuple) fail("unhashable type: 'list'");
      if (item.is_dict()) fail("unhashable type: 'dict'");
      return container.dict().find(item) != nullptr;
    default: failf("argument of type '{}' is not iterable", type_name(container));
  }
}

Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_string() && !obj.is_list()) failf("'{}' object is not subscriptable", type_name(obj));
  auto index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_int() && !v.is_bool()) failf("slice {} must be an integer or None, got {}", what, type_name(v));
    return to_int64(v);
  };
  int64_t st = index(step, "step").value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_string()) {
    off = char_offsets(obj.str());
    n = static_cast<int64_t>(off.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.list().items.size());
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x = x < -n ? (st < 0 ? -1 : 0) : x + n;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(index(start, "start"), st < 0 ? n - 1 : 0);
  int64_t e = adjust(index(stop, "stop"), st < 0 ? -1 : n);
  // Python's slice length; indices stay within [-1, n] so the arithmetic cannot overflow.
  int64_t count = 0;
  if (st > 0 && b < e) count = (e - b - 1) / st + 1;
  if (st < 0 && b > e) count = (b - e - 1) / (st == INT64_MIN ? INT64_MAX : -st) + 1;
  std::vector<int64_t> picks;
  picks.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) picks.push_back(b + k * st);
  in.charge(static_cast<int64_t>(picks.size()) / 16);
  if (obj.is_string()) {
    if (st == 1) return Value::string(obj.str().substr(off[b], picks.empty() ? 0 : off[e] - off[b]));
    std::string out;
    for (int64_t i : picks) out.append(obj.str(), off[i], off[i + 1] - off[i]);
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(picks.size());
  for (int64_t i : picks) items.push_back(obj.list().items[static_cast<size_t>(i)]);
  return Value::make_list(std::move(items), obj.list().tuple);
}

}  // namespace tern::text::jinja
