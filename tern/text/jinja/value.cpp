// Value construction and Python semantics: truthiness, str()/repr(), equality, ordering, dict keys.
#include "tern/text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "tern/text/jinja/unicode.h"

namespace tern::text::jinja {

void fail(std::string message) { throw RenderError{std::move(message)}; }

namespace {
thread_local size_t size_cap = SIZE_MAX;
}  // namespace

SizeCap::SizeCap(size_t max_bytes) : saved_(size_cap) { size_cap = max_bytes; }
SizeCap::~SizeCap() { size_cap = saved_; }
size_t SizeCap::current() { return size_cap; }
void SizeCap::check(size_t n) {
  if (n > size_cap) failf("expected output and values of at most {} bytes, got more", size_cap);
}

namespace {

// A canonical hash key; equal Python keys (1, 1.0, True) map to the same string.
std::string key_id(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return "s" + k.str();
    case Kind::kBool:
      return k.as_bool() ? "i1" : "i0";
    case Kind::kInt:
      return fmt::format("i{}", k.as_int());
    case Kind::kFloat: {
      double d = k.as_float();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
        return fmt::format("i{}", static_cast<int64_t>(d));
      return fmt::format("f{}", float_repr(d));
    }
    case Kind::kNone:
      return "n";
    case Kind::kUndefined:
      return "u";
    case Kind::kCallable:
      return fmt::format("c{}", static_cast<const void*>(&k.callable()));
    case Kind::kList:
      if (k.list().tuple) {
        std::string id = "t(";
        for (const auto& x : k.list().items) id += key_id(x) + "\x1f";
        return id + ")";
      }
      break;
    default:
      break;
  }
  failf("unhashable type: '{}'", type_name(k));
}

}  // namespace

const Value* DictData::find(const Value& key) const {
  auto it = index_.find(key_id(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

namespace {

// Namespaces stay out of containers: that is what makes reference cycles impossible.
int checked_child_depth(const Value& v) {
  if (v.is_namespace()) fail("namespace objects cannot be stored in lists or dicts");
  int d = value_depth(v);
  if (d + 1 > kMaxValueDepth) failf("expected values nested at most {} deep, got deeper", kMaxValueDepth);
  return d;
}

}  // namespace

int value_depth(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth();
  return 0;
}

void DictData::set(const Value& key, Value value) {
  depth_ = std::max(depth_, checked_child_depth(value) + 1);
  auto [it, inserted] = index_.emplace(key_id(key), entries_.size());
  if (inserted) {
    entries_.emplace_back(key, std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
}

size_t DictData::size() const { return entries_.size(); }

Value Value::make_list(std::vector<Value> items, bool tuple) {
  SizeCap::check(items.size() * sizeof(Value));
  auto l = std::make_shared<ListData>();
  for (const auto& x : items) l->depth = std::max(l->depth, checked_child_depth(x) + 1);
  l->items = std::move(items);
  l->tuple = tuple;
  return {std::move(l)};
}

Value Value::make_dict(DictData d) { return {std::make_shared<DictData>(std::move(d))}; }

Value Value::make_ns(DictData attrs) { return {std::make_shared<NamespaceData>(NamespaceData{std::move(attrs)})}; }

Value Value::make_callable(std::string name, NativeFn fn) {
  return {std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)})};
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.list().tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "object";
}

void fail_undefined(const Value& v) { fail(v.is_undefined() ? v.undefined_hint() : "value is undefined"); }

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return v.list().generator || !v.list().items.empty();
    case Kind::kDict: return v.dict().size() > 0;
    default: return true;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {
    // fixed notation, as Python's repr for 1e-4 <= |d| < 1e16
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp + 1) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  return out + fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
}

namespace {

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += q;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kString: return repr_string(v.str());
    case Kind::kList: {
      const auto& l = v.list();
      std::string out = l.tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        out += (i ? ", " : "") + repr(l.items[i]);
        SizeCap::check(out.size());
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      return out + (l.tuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict().entries()) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        SizeCap::check(out.size());
        first = false;
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.ns().attrs.entries()) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        SizeCap::check(out.size());
        first = false;
      }
      return out + "}>";
    }
    case Kind::kUndefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(v.as_int());
    case Kind::kFloat: return float_repr(v.as_float());
    case Kind::kString: return v.str();
    case Kind::kCallable: return "<function " + v.callable().name + ">";
    default: return repr(v);
  }
}

double to_double(const Value& v) {
  if (v.is_float()) return v.as_float();
  if (v.is_int()) return static_cast<double>(v.as_int());
  if (v.is_bool()) return v.as_bool() ? 1.0 : 0.0;
  if (v.is_undefined()) fail_undefined(v);
  failf("expected a number, got {}", type_name(v));
}

int64_t to_int64(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_undefined()) fail_undefined(v);
  failf("expected an integer, got {}", type_name(v));
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return to_double(a) == to_double(b);
    return to_int64(a) == to_int64(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      const auto &x = a.list(), &y = b.list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, x] : a.dict().entries()) {
        const Value* y = b.dict().find(k);
        if (!y || !equals(x, *y)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return &a.ns() == &b.ns();
    case Kind::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = to_double(a), y = to_double(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = to_int64(a), y = to_int64(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  failf("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: return v.list().items;
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& e : v.dict().entries()) keys.push_back(e.first);
      return keys;
    }
    case Kind::kString: {
      SizeCap::check(char_count(v.str()) * sizeof(Value));
      std::vector<size_t> off = char_offsets(v.str());
      std::vector<Value> chars;
      chars.reserve(off.size() - 1);
      for (size_t i = 0; i + 1 < off.size(); ++i)
        chars.push_back(Value::string(v.str().substr(off[i], off[i + 1] - off[i])));
      return chars;
    }
    default: failf("'{}' object is not iterable", type_name(v));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(char_count(v.str()));
    case Kind::kList: return static_cast<int64_t>(v.list().items.size());
    case Kind::kDict: return static_cast<int64_t>(v.dict().size());
    default: failf("object of type '{}' has no len()", type_name(v));
  }
}

}  // namespace tern::text::jinja
