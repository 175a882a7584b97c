// Shape arithmetic.
#include "tern/core/shape.h"

#include "tern/base/error.h"

namespace tern {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int normalize_dim(int64_t dim, size_t rank, const char* what) {
  int64_t r = static_cast<int64_t>(rank);
  int64_t d = dim < 0 ? dim + r : dim;
  TERN_CHECK(d >= 0 && d < r, "[{}] expected dim in [{}, {}), got {}", what, -r, r, dim);
  return static_cast<int>(d);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TERN_CHECK(da == db || da == 1 || db == 1, "[{}] expected broadcastable shapes, got {} and {}", what,
               shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tern
