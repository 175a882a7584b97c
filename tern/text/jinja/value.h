// Jinja runtime values: undefined, none, bool, int, float, string, list/tuple, insertion-ordered
// dict, namespace and callables, with Python's truthiness, equality, ordering, str() and repr().
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace tern::text::jinja {

class Interpreter;
struct Value;

// A runtime error raised while rendering. ChatTemplate::render adds "[template] line L: " and
// rethrows it as tern::Error; raise_exception() throws tern::Error itself (its text must stay bare).
struct RenderError {
  std::string message;
};
[[noreturn]] void fail(std::string message);
template <typename... A>
[[noreturn]] void failf(fmt::format_string<A...> f, A&&... a) {
  fail(fmt::format(f, std::forward<A>(a)...));
}

// Values nest at most this deep (containers in containers), so destruction and printing of any value
// a template can build stay within the native stack.
constexpr int kMaxValueDepth = 256;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;      // prints as (a, b) and never equals a list, as in Python
  bool generator = false;  // stands for a Python generator (select, map, ...): truthy even when empty
  int depth = 1;       // 1 + the deepest container inside
};

// An insertion-ordered dict with hashable keys (str, int, float, bool, none, tuples of those).
class DictData {
 public:
  const Value* find(const Value& key) const;  // nullptr when absent
  // Inserts at the end or overwrites in place. Fails for unhashable keys, namespaces as values and
  // nesting deeper than kMaxValueDepth.
  void set(const Value& key, Value value);
  size_t size() const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  int depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
  std::unordered_map<std::string, size_t> index_;
};

struct NamespaceData {
  DictData attrs;
};

// Arguments of one call: positional then keyword, in call order.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;
struct CallableData {
  std::string name;
  NativeFn fn;
};

// Jinja's default Undefined: prints as "", iterates as empty, is falsy; any strict use (attribute,
// call, arithmetic) fails with hint, e.g. "'x' is undefined".
struct Undefined {
  std::string hint;
};
struct None {};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

struct Value {
  using Var = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<ListData>,
                           std::shared_ptr<DictData>, std::shared_ptr<NamespaceData>, std::shared_ptr<CallableData>>;
  Var v;

  static Value undefined(std::string hint) { return {Undefined{std::move(hint)}}; }
  static Value none() { return {None{}}; }
  static Value boolean(bool b) { return {b}; }
  static Value integer(int64_t i) { return {i}; }
  static Value number(double d) { return {d}; }
  static Value string(std::string s) { return {std::move(s)}; }
  // Fails (RenderError) if an item is a namespace or the list would nest deeper than kMaxValueDepth.
  static Value make_list(std::vector<Value> items, bool tuple = false);
  static Value make_dict(DictData d = {});
  static Value make_ns(DictData attrs = {});
  static Value make_callable(std::string name, NativeFn fn);

  Kind kind() const { return static_cast<Kind>(v.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v); }
  int64_t as_int() const { return std::get<int64_t>(v); }
  double as_float() const { return std::get<double>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  ListData& list() const { return *std::get<std::shared_ptr<ListData>>(v); }
  DictData& dict() const { return *std::get<std::shared_ptr<DictData>>(v); }
  NamespaceData& ns() const { return *std::get<std::shared_ptr<NamespaceData>>(v); }
  CallableData& callable() const { return *std::get<std::shared_ptr<CallableData>>(v); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v).hint; }
};

// Caps the text repr()/to_str() and dumps() may build, and the items of one list, on this thread
// while alive (the interpreter holds one per render); beyond it they fail with a RenderError. Without
// one the cap is unlimited.
class SizeCap {
 public:
  explicit SizeCap(size_t max_bytes);
  ~SizeCap();
  SizeCap(const SizeCap&) = delete;
  SizeCap& operator=(const SizeCap&) = delete;
  static size_t current();
  // Fails when n bytes would exceed the current cap.
  static void check(size_t n);

 private:
  size_t saved_;
};

// Container depth of a value: 0 for scalars, ListData/DictData depth otherwise.
int value_depth(const Value& v);

// Python's type name ("str", "int", "list", "dict", "NoneType", ...), for messages.
std::string type_name(const Value& v);
// Fails with the undefined value's hint; call on any strict use of an undefined value.
[[noreturn]] void fail_undefined(const Value& v);

bool truthy(const Value& v);
// str(v) as Jinja prints it: undefined -> "", None -> "None", True -> "True", lists and dicts as repr.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);  // Python's repr(float): 0.1, 1e-05, 1e+16, inf, nan

// Python ==, and the ordering of < (-1, 0, 1); compare fails on types Python cannot order.
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// int/float view of a number (bools count as ints); fails for anything else.
double to_double(const Value& v);
int64_t to_int64(const Value& v);

// Python's iter(): list items, dict keys, string characters; undefined iterates as empty.
std::vector<Value> iterate(const Value& v);
// len(): characters of a string, items of a list or dict; undefined has length 0.
int64_t length(const Value& v);

}  // namespace tern::text::jinja
