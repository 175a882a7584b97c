// Jinja's built-in filters, tests, globals and the str/dict/list methods templates call.
#pragma once
#include <optional>
#include <string>

#include "tern/text/jinja/interpreter.h"
#include "tern/text/jinja/value.h"

namespace tern::text::jinja {

// Applies the filter `name` (filters.cpp); fails for unknown filters and bad arguments.
Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);

// Evaluates the test `name` (tests.cpp), as in `x is name(args)`; fails for unknown tests.
bool apply_test(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);

// `obj.name` as a bound method (methods.cpp) when obj is a str, list or dict with such a method.
std::optional<Value> find_method(const Value& obj, const std::string& name);

// range, namespace, dict, raise_exception, strftime_now, joiner, cycler (globals.cpp).
void install_globals(Frame& frame);

// Argument `pos` (positional) or `name` (keyword) of a builtin call, nullptr when not given.
const Value* arg(const CallArgs& a, size_t pos, const char* name);
// Python's %-formatting of a string ("%s", "%d", "%r", "%f", "%%"), for `fmt % args` and |format.
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace tern::text::jinja
