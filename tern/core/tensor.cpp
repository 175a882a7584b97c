// Tensor construction, views and copies.
#include "tern/core/tensor.h"

#include <cstring>
#include <numeric>

namespace tern {

Tensor Tensor::empty(const Shape& shape, Dtype dtype, Device dev) {
  for (int64_t d : shape) TERN_CHECK(d >= 0, "[tensor] expected non-negative sizes, got {}", shape_str(shape));
  Tensor t;
  t.storage_ = Storage::allocate(static_cast<size_t>(tern::numel(shape)) * dtype_size(dtype), dev);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, Dtype dtype, Device dev) {
  Tensor t = empty(shape, dtype, dev);
  if (dev.is_cpu()) {
    std::memset(t.data_ptr(), 0, t.nbytes());
  } else {
    device_runtime(dev.kind).memset_zero(t.data_ptr(), t.nbytes(), dev);
  }
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, Dtype dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = static_cast<T>(static_cast<float>(value));
    if constexpr (std::is_integral_v<T>) v = static_cast<T>(value);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  });
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape,
                            const Strides& strides, Dtype dtype) {
  TERN_CHECK(shape.size() == strides.size(), "[tensor] expected strides of rank {}, got {}", shape.size(),
             strides.size());
  int64_t lo = offset, hi = offset;
  bool empty_view = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty_view = true;
    int64_t ext = (shape[i] - 1) * strides[i];
    (ext < 0 ? lo : hi) += ext;
  }
  int64_t cap = static_cast<int64_t>(storage->bytes() / dtype_size(dtype));
  TERN_CHECK(empty_view || (lo >= 0 && hi < cap), "[tensor] expected a view inside storage of {} elements, got offset {} shape {}",
             cap, offset, shape_str(shape));
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = offset;
  t.shape_ = shape;
  t.strides_ = strides;
  t.dtype_ = dtype;
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  TERN_CHECK(storage_ != nullptr, "[tensor] expected a defined tensor, got an undefined one");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  int d = normalize_dim(dim, rank(), "slice");
  int64_t n = shape_[d];
  TERN_CHECK(step > 0, "[slice] expected a positive step, got {}", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = (end - start + step - 1) / step;
  t.strides_[d] *= step;
  return t;
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  int d = normalize_dim(dim, rank(), "select");
  if (index < 0) index += shape_[d];
  TERN_CHECK(index >= 0 && index < shape_[d], "[select] expected index in [0, {}), got {}", shape_[d], index);
  Tensor t = *this;
  t.offset_ += index * strides_[d];
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  int a = normalize_dim(d0, rank(), "transpose"), b = normalize_dim(d1, rank(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  TERN_CHECK(order.size() == rank(), "[permute] expected {} dims, got {}", rank(), order.size());
  Tensor t = *this;
  std::vector<bool> seen(rank(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    int d = normalize_dim(order[i], rank(), "permute");
    TERN_CHECK(!seen[d], "[permute] expected each dim once, got {} twice", d);
    seen[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  int d = normalize_dim(dim, rank() + 1, "unsqueeze");
  Tensor t = *this;
  int64_t st = d < static_cast<int>(rank()) ? shape_[d] * strides_[d] : 1;
  t.shape_.insert(t.shape_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, st);
  return t;
}

Tensor Tensor::squeeze(int64_t dim) const {
  int d = normalize_dim(dim, rank(), "squeeze");
  TERN_CHECK(shape_[d] == 1, "[squeeze] expected size 1 at dim {}, got {}", d, shape_[d]);
  Tensor t = *this;
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::broadcast_to(const Shape& shape) const {
  TERN_CHECK(shape.size() >= rank(), "[broadcast_to] expected rank >= {}, got {}", rank(), shape.size());
  Tensor t = *this;
  size_t lead = shape.size() - rank();
  t.shape_ = shape;
  t.strides_.assign(shape.size(), 0);
  for (size_t i = 0; i < rank(); ++i) {
    int64_t s = shape_[i], want = shape[lead + i];
    TERN_CHECK(s == want || s == 1, "[broadcast_to] expected {} to broadcast to {}", shape_str(shape_),
               shape_str(shape));
    t.strides_[lead + i] = s == 1 ? 0 : strides_[i];
  }
  return t;
}

namespace {
Shape infer_shape(const Shape& want, int64_t n, const char* what) {
  Shape s = want;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TERN_CHECK(infer < 0, "[{}] expected at most one -1, got {}", what, shape_str(want));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    TERN_CHECK(known > 0 && n % known == 0, "[{}] cannot infer -1 in {} for {} elements", what, shape_str(want), n);
    s[infer] = n / known;
  }
  TERN_CHECK(tern::numel(s) == n, "[{}] expected {} elements, got shape {}", what, n, shape_str(s));
  return s;
}

// Strides for viewing (shape, strides) as new_shape without a copy, or empty when impossible.
bool view_strides(const Shape& shape, const Strides& strides, const Shape& ns, Strides& out) {
  // Group old dims into chunks that are contiguous among themselves and match new dims.
  out.assign(ns.size(), 0);
  size_t oi = 0, ni = 0;
  const size_t on = shape.size(), nn = ns.size();
  while (ni < nn || oi < on) {
    if (ni < nn && ns[ni] == 1) { out[ni] = 1; ++ni; continue; }
    if (oi < on && shape[oi] == 1) { ++oi; continue; }
    if (ni >= nn || oi >= on) return false;
    int64_t osz = shape[oi], nsz = ns[ni];
    size_t o_begin = oi, n_begin = ni;
    ++oi; ++ni;
    while (osz != nsz) {
      if (osz < nsz) {
        if (oi >= on) return false;
        if (shape[oi] != 1 && strides[oi - 1] != shape[oi] * strides[oi]) {
          // skip size-1 dims when checking contiguity
          size_t prev = oi - 1;
          while (prev > o_begin && shape[prev] == 1) --prev;
          if (strides[prev] != shape[oi] * strides[oi]) return false;
        }
        osz *= shape[oi++];
      } else {
        if (ni >= nn) return false;
        nsz *= ns[ni++];
      }
    }
    // old dims [o_begin, oi) form one contiguous block; its innermost stride is that of the last non-1 dim
    int64_t inner = 1;
    for (size_t k = oi; k-- > o_begin;) {
      if (shape[k] != 1) { inner = strides[k]; break; }
    }
    int64_t acc = inner;
    for (size_t k = ni; k-- > n_begin;) {
      out[k] = acc;
      acc *= ns[k];
    }
  }
  return true;
}
}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  Shape s = infer_shape(shape, numel(), "view");
  Strides st;
  if (is_contiguous()) {
    st = contiguous_strides(s);
  } else {
    TERN_CHECK(view_strides(shape_, strides_, s, st), "[view] expected a layout viewable as {}, got shape {} strides {}",
               shape_str(s), shape_str(shape_), shape_str(strides_));
  }
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = st;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = infer_shape(shape, numel(), "reshape");
  Strides st;
  if (is_contiguous() || view_strides(shape_, strides_, s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor src = contiguous();
  Tensor t = empty(shape_, dtype_, dev);
  DeviceKind k = dev.is_cpu() ? src.device().kind : dev.kind;
  device_runtime(k).copy(t.data_ptr(), dev, src.data_ptr(), src.device(), nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  TERN_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "[copy] expected {} {}, got {} {}", shape_str(shape_),
             dtype_name(dtype_), shape_str(src.shape_), dtype_name(src.dtype_));
  if (numel() == 0) return;
  if (device() != src.device()) {
    TERN_CHECK(is_contiguous(), "[copy] expected a contiguous destination across devices");
    Tensor s = src.device().is_cpu() ? src.contiguous() : src.contiguous();
    DeviceKind k = device().is_cpu() ? src.device().kind : device().kind;
    device_runtime(k).copy(data_ptr(), device(), s.data_ptr(), s.device(), nbytes());
    return;
  }
  if (device().is_cpu()) {
    cpu_strided_copy(src, *this);
  } else {
    device_runtime(device().kind).strided_copy(src, *this);
  }
}

void cpu_strided_copy(const Tensor& src, Tensor& dst) {
  const size_t es = dtype_size(src.dtype());
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), n * es);
    return;
  }
  const size_t r = src.rank();
  const auto& shape = src.shape();
  const char* sp = static_cast<const char*>(src.data_ptr());
  char* dp = static_cast<char*>(dst.data_ptr());
  if (r == 0) {
    std::memcpy(dp, sp, es);
    return;
  }
  const int64_t inner = shape[r - 1];
  const int64_t ss = src.strides()[r - 1] * es, ds = dst.strides()[r - 1] * es;
  const int64_t rows = n / inner;
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t so = 0, dof = 0;
    for (size_t d = 0; d + 1 < r; ++d) {
      so += idx[d] * src.strides()[d];
      dof += idx[d] * dst.strides()[d];
    }
    const char* s = sp + so * es;
    char* dd = dp + dof * es;
    if (ss == static_cast<int64_t>(es) && ds == static_cast<int64_t>(es)) {
      std::memcpy(dd, s, inner * es);
    } else {
      switch (es) {
        case 4: for (int64_t i = 0; i < inner; ++i) std::memcpy(dd + i * ds, s + i * ss, 4); break;
        case 2: for (int64_t i = 0; i < inner; ++i) std::memcpy(dd + i * ds, s + i * ss, 2); break;
        default: for (int64_t i = 0; i < inner; ++i) std::memcpy(dd + i * ds, s + i * ss, es); break;
      }
    }
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<float> Tensor::to_f32_vector() const {
  TERN_CHECK(device().is_cpu(), "[tensor] expected a cpu tensor, got {}", device().str());
  Tensor c = contiguous();
  std::vector<float> out(c.numel());
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(c.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  });
  return out;
}

}  // namespace tern
