// Global functions every template sees: Jinja's range/namespace/dict/joiner and HF's
// raise_exception and strftime_now.
#include <ctime>

#include "tern/base/error.h"
#include "tern/text/jinja/builtins.h"

namespace tern::text::jinja {

namespace {

// Jinja's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range(Interpreter& in, CallArgs& a) {
  if (!a.kwargs.empty()) fail("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) failf("range expected 1 to 3 arguments, got {}", a.args.size());
  int64_t start = 0, stop, step = 1;
  for (const auto& x : a.args)
    if (!x.is_int() && !x.is_bool()) failf("'{}' object cannot be interpreted as an integer", type_name(x));
  if (a.args.size() == 1) {
    stop = to_int64(a.args[0]);
  } else {
    start = to_int64(a.args[0]);
    stop = to_int64(a.args[1]);
    if (a.args.size() == 3) step = to_int64(a.args[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Count in long double so extreme bounds cannot overflow.
  long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  long double count = step > 0 ? (span > 0 ? (span + step - 1) / step : 0) : (span < 0 ? (span + step + 1) / step : 0);
  if (count > kMaxRange) failf("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  auto n = static_cast<int64_t>(count);
  in.charge(n / 16);
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) items.push_back(Value::integer(start + i * step));
  return Value::make_list(std::move(items));
}

// dict(**kw) / namespace(mapping?, **kw): the attributes in call order.
DictData keyword_dict(CallArgs& a, const char* what) {
  DictData d;
  if (a.args.size() > 1) failf("{} expected at most 1 positional argument, got {}", what, a.args.size());
  if (!a.args.empty()) {
    const Value& init = a.args[0];
    if (init.is_dict()) {
      for (const auto& [k, v] : init.dict().entries()) d.set(k, v);
    } else {
      for (const auto& pair : iterate(init)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) failf("{} sequence element has length {}; 2 is required", what, kv.size());
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(Value::string(k), v);
  return d;
}

std::string strftime_now(const std::string& format) {
  if (format.empty()) return "";
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string buf(format.size() * 40 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
  buf.resize(n);
  return buf;
}

}  // namespace

void install_globals(Frame& frame) {
  frame.vars["range"] = Value::make_callable("range", range);
  frame.vars["dict"] = Value::make_callable("dict", [](Interpreter&, CallArgs& a) { return Value::make_dict(keyword_dict(a, "dict")); });
  frame.vars["namespace"] =
      Value::make_callable("namespace", [](Interpreter&, CallArgs& a) { return Value::make_ns(keyword_dict(a, "namespace")); });
  frame.vars["raise_exception"] = Value::make_callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    // The template's own message, bare: callers print it as the error.
    throw ::tern::Error(a.args.empty() ? std::string() : to_str(a.args[0]));
  });
  frame.vars["strftime_now"] = Value::make_callable("strftime_now", [](Interpreter&, CallArgs& a) {
    if (a.args.empty() || !a.args[0].is_string()) fail("strftime_now expects a format string");
    return Value::string(strftime_now(a.args[0].str()));
  });
  frame.vars["joiner"] = Value::make_callable("joiner", [](Interpreter&, CallArgs& a) {
    std::string sep = a.args.empty() ? ", " : to_str(a.args[0]);
    auto used = std::make_shared<bool>(false);
    return Value::make_callable("joiner", [sep, used](Interpreter&, CallArgs&) {
      if (!*used) {
        *used = true;
        return Value::string("");
      }
      return Value::string(sep);
    });
  });
}

}  // namespace tern::text::jinja
