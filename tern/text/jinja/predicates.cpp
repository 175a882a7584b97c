// Jinja's built-in tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...).
#include <cmath>
#include <unordered_map>

#include "tern/text/jinja/builtins.h"
#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, const CallArgs&);

const Value& need(const CallArgs& a, const char* test) {
  if (a.args.empty() && a.kwargs.empty()) failf("test '{}' expects an argument", test);
  return a.args.empty() ? a.kwargs.front().second : a.args.front();
}

// Python's x % 2 for floats (the result takes the divisor's sign).
double py_mod2(double x) {
  double r = std::fmod(x, 2.0);
  return r < 0 ? r + 2.0 : r;
}

int cmp(const Value& v, const CallArgs& a, const char* test) { return compare(v, need(a, test)); }

bool has_case(const std::string& s, bool upper) {
  bool cased = false;
  char32_t cp;
  for (size_t i = 0; i < s.size(); i += utf8_decode(s, i, cp)) {
    utf8_decode(s, i, cp);
    if (!is_cased_letter(cp)) continue;
    cased = true;
    if ((upper ? to_upper(cp) : to_lower(cp)) != cp) return false;
  }
  return cased;
}

const std::unordered_map<std::string, TestFn>& test_table() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", [](Interpreter&, const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"false", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"true", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_float(); }},
      {"number", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_dict(); }},
      {"iterable", [](Interpreter&, const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence", [](Interpreter&, const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"callable", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_callable(); }},
      {"odd", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_float() ? py_mod2(v.as_float()) == 1 : to_int64(v) % 2 != 0; }},
      {"even", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_float() ? py_mod2(v.as_float()) == 0 : to_int64(v) % 2 == 0; }},
      {"divisibleby", [](Interpreter&, const Value& v, const CallArgs& a) {
         const Value& dv = need(a, "divisibleby");
         if (v.is_float() || dv.is_float()) {
           if (to_double(dv) == 0) fail("float modulo");
           return std::fmod(to_double(v), to_double(dv)) == 0;
         }
         int64_t d = to_int64(dv);
         if (d == 0) fail("integer division or modulo by zero");
         return d == -1 || to_int64(v) % d == 0;
       }},
      {"lower", [](Interpreter&, const Value& v, const CallArgs&) { return has_case(to_str(v), false); }},
      {"upper", [](Interpreter&, const Value& v, const CallArgs&) { return has_case(to_str(v), true); }},
      {"sameas", [](Interpreter&, const Value& v, const CallArgs& a) {
         const Value& o = need(a, "sameas");
         if (v.kind() != o.kind()) return false;
         if (v.is_none() || v.is_undefined()) return true;
         if (v.is_bool()) return v.as_bool() == o.as_bool();
         if (v.is_list()) return &v.list() == &o.list();
         if (v.is_dict()) return &v.dict() == &o.dict();
         if (v.is_namespace()) return &v.ns() == &o.ns();
         if (v.is_callable()) return &v.callable() == &o.callable();
         return equals(v, o);
       }},
      {"in", [](Interpreter&, const Value& v, const CallArgs& a) { return contains(need(a, "in"), v); }},
      {"eq", [](Interpreter&, const Value& v, const CallArgs& a) { return equals(v, need(a, "eq")); }},
      {"ne", [](Interpreter&, const Value& v, const CallArgs& a) { return !equals(v, need(a, "ne")); }},
      {"lt", [](Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, a, "lt") < 0; }},
      {"le", [](Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, a, "le") <= 0; }},
      {"gt", [](Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, a, "gt") > 0; }},
      {"ge", [](Interpreter&, const Value& v, const CallArgs& a) { return cmp(v, a, "ge") >= 0; }},
      {"escaped", [](Interpreter&, const Value&, const CallArgs&) { return false; }},
      {"filter", [](Interpreter&, const Value& v, const CallArgs&) {
         static const char* const kNames[] = {"abs", "attr", "capitalize", "center", "count", "d", "default",
                                              "dictsort", "e", "escape", "first", "float", "format", "indent",
                                              "int", "items", "join", "last", "length", "list", "lower", "map",
                                              "max", "min", "reject", "rejectattr", "replace", "reverse", "round",
                                              "safe", "select", "selectattr", "sort", "string", "sum", "title",
                                              "tojson", "trim", "unique", "upper", "wordcount"};
         for (const char* n : kNames)
           if (v.is_string() && v.str() == n) return true;
         return false;
       }},
  };
  return table;
}

const char* alias(const std::string& name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == ">=") return "ge";
  return nullptr;
}

}  // namespace

bool apply_test(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  const auto& table = test_table();
  const char* a = alias(name);
  auto it = table.find(a ? std::string(a) : name);
  if (it == table.end()) {
    if (name == "test") return table.count(to_str(input)) > 0 || alias(to_str(input)) != nullptr;
    failf("no test named '{}'", name);
  }
  return it->second(in, input, args);
}

}  // namespace tern::text::jinja
