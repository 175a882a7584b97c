// CPU element-wise kernels: binary arithmetic, unary activations, affine, softcap, gated
// activations and dtype casts, over strided operands (f32 math for the float dtypes).
#include <cmath>
#include <limits>
#include <type_traits>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/elementwise.h"

namespace tern::cpu {
namespace {

using detail::dispatch_float;
using detail::exp_f32;
using detail::RowLayout;

template <typename T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;
// The type arithmetic runs in: f32 for the float dtypes, the integer type itself otherwise.
template <typename T>
using Compute = std::conditional_t<kIsFloat<T>, float, T>;

// out[i] = f(x[i]) for same-shape x and out of storage type T.
template <typename T, typename F>
void map_unary(const Tensor& x, Tensor& out, F f) {
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  RowLayout<2> lay(out.shape(), {&x, &out}, true);
  const int64_t sx = lay.inner_stride[0], so = lay.inner_stride[1];
  lay.parallel_elements([&](const int64_t* o, int64_t n) {
    const T* xs = px + o[0];
    T* os = po + o[1];
    if (sx == 1 && so == 1) {
      for (int64_t i = 0; i < n; ++i) os[i] = T(f(static_cast<Compute<T>>(xs[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) os[i * so] = T(f(static_cast<Compute<T>>(xs[i * sx])));
    }
  });
}

// out[i] = f(a[i], b[i]) for a, b already broadcast to out's shape (stride 0 on broadcast dims).
template <typename T, typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  using C = Compute<T>;
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  RowLayout<3> lay(out.shape(), {&a, &b, &out}, true);
  const int64_t sa = lay.inner_stride[0], sb = lay.inner_stride[1], so = lay.inner_stride[2];
  lay.parallel_elements([&](const int64_t* o, int64_t n) {
    const T* as = pa + o[0];
    const T* bs = pb + o[1];
    T* os = po + o[2];
    if (sa == 1 && sb == 1 && so == 1) {
      for (int64_t i = 0; i < n; ++i) os[i] = T(f(static_cast<C>(as[i]), static_cast<C>(bs[i])));
    } else if (sa == 1 && sb == 0 && so == 1) {
      const C bv = static_cast<C>(bs[0]);
      for (int64_t i = 0; i < n; ++i) os[i] = T(f(static_cast<C>(as[i]), bv));
    } else if (sa == 0 && sb == 1 && so == 1) {
      const C av = static_cast<C>(as[0]);
      for (int64_t i = 0; i < n; ++i) os[i] = T(f(av, static_cast<C>(bs[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) os[i * so] = T(f(static_cast<C>(as[i * sa]), static_cast<C>(bs[i * sb])));
    }
  });
}

template <typename T>
void binary_typed(const Tensor& a, const Tensor& b, ops::BinaryOp op, Tensor& out) {
  using C = Compute<T>;
  switch (op) {
    case ops::BinaryOp::add: return map_binary<T>(a, b, out, [](C x, C y) { return x + y; });
    case ops::BinaryOp::sub: return map_binary<T>(a, b, out, [](C x, C y) { return x - y; });
    case ops::BinaryOp::mul: return map_binary<T>(a, b, out, [](C x, C y) { return x * y; });
    case ops::BinaryOp::div:
      if constexpr (kIsFloat<T>) return map_binary<T>(a, b, out, [](C x, C y) { return x / y; });
      TERN_ASSERT(false, "integer div reached the cpu kernel");
      return;
    // NaN propagates, as in torch.maximum / torch.minimum.
    case ops::BinaryOp::maximum:
      return map_binary<T>(a, b, out, [](C x, C y) { return (x != x || x > y) ? x : y; });
    case ops::BinaryOp::minimum:
      return map_binary<T>(a, b, out, [](C x, C y) { return (x != x || x < y) ? x : y; });
  }
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }
constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline float gelu_tanh_f32(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}
inline float gelu_erf_f32(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

template <typename T>
void unary_typed(const Tensor& x, ops::UnaryOp op, Tensor& out) {
  using U = ops::UnaryOp;
  switch (op) {
    case U::neg: return map_unary<T>(x, out, [](float v) { return -v; });
    case U::exp: return map_unary<T>(x, out, [](float v) { return exp_f32(v); });
    case U::log: return map_unary<T>(x, out, [](float v) { return std::log(v); });
    case U::sqrt: return map_unary<T>(x, out, [](float v) { return std::sqrt(v); });
    case U::rsqrt: return map_unary<T>(x, out, [](float v) { return 1.0f / std::sqrt(v); });
    case U::tanh: return map_unary<T>(x, out, [](float v) { return std::tanh(v); });
    case U::sigmoid: return map_unary<T>(x, out, [](float v) { return sigmoid_f32(v); });
    case U::silu: return map_unary<T>(x, out, [](float v) { return v * sigmoid_f32(v); });
    case U::gelu_tanh: return map_unary<T>(x, out, [](float v) { return gelu_tanh_f32(v); });
    case U::gelu_erf: return map_unary<T>(x, out, [](float v) { return gelu_erf_f32(v); });
    case U::relu: return map_unary<T>(x, out, [](float v) { return v > 0.0f ? v : (v != v ? v : 0.0f); });
    // torch.nn.functional.softplus with beta 1, threshold 20.
    case U::softplus: return map_unary<T>(x, out, [](float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); });
    case U::abs: return map_unary<T>(x, out, [](float v) { return std::fabs(v); });
    case U::square: return map_unary<T>(x, out, [](float v) { return v * v; });
  }
}

// Float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0 (defined
// behaviour where a plain static_cast would not be).
template <typename D>
D float_to_int(double v) {
  if (v != v) return D(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<D>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<D>::max());
  if (v <= lo) return std::numeric_limits<D>::lowest();
  if (v >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

template <typename D, typename S>
inline D convert(S s) {
  if constexpr (std::is_same_v<D, bool>) {
    if constexpr (kIsFloat<S>) return static_cast<float>(s) != 0.0f;
    else return s != S(0);
  } else if constexpr (kIsFloat<D>) {
    return D(static_cast<float>(s));
  } else if constexpr (kIsFloat<S>) {
    return float_to_int<D>(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}

template <typename S, typename D>
void cast_typed(const Tensor& x, Tensor& out) {
  const S* px = static_cast<const S*>(x.data_ptr());
  D* po = static_cast<D*>(out.data_ptr());
  RowLayout<2> lay(out.shape(), {&x, &out}, true);
  const int64_t sx = lay.inner_stride[0], so = lay.inner_stride[1];
  lay.parallel_elements([&](const int64_t* o, int64_t n) {
    const S* xs = px + o[0];
    D* os = po + o[1];
    if (sx == 1 && so == 1) {
      for (int64_t i = 0; i < n; ++i) os[i] = convert<D>(xs[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) os[i * so] = convert<D>(xs[i * sx]);
    }
  });
}

}  // namespace

void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, Tensor& out) {
  switch (a.dtype()) {
    case Dtype::i32: return binary_typed<int32_t>(a, b, op, out);
    case Dtype::i64: return binary_typed<int64_t>(a, b, op, out);
    default: return dispatch_float(a.dtype(), [&](auto tag) { binary_typed<decltype(tag)>(a, b, op, out); });
  }
}

void unary(const Tensor& x, ops::UnaryOp op, Tensor& out) {
  dispatch_float(x.dtype(), [&](auto tag) { unary_typed<decltype(tag)>(x, op, out); });
}

void affine(const Tensor& x, float mul, float add, Tensor& out) {
  dispatch_float(x.dtype(), [&](auto tag) {
    map_unary<decltype(tag)>(x, out, [mul, add](float v) { return v * mul + add; });
  });
}

void softcap(const Tensor& x, float cap, Tensor& out) {
  // As HF writes it: tanh(x / cap) * cap.
  dispatch_float(x.dtype(), [&](auto tag) {
    map_unary<decltype(tag)>(x, out, [cap](float v) { return std::tanh(v / cap) * cap; });
  });
}

void gated(const Tensor& gate, const Tensor& up, ops::UnaryOp act, Tensor& out) {
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (act) {
      case ops::UnaryOp::silu:
        return map_binary<T>(gate, up, out, [](float g, float u) { return g * sigmoid_f32(g) * u; });
      case ops::UnaryOp::gelu_tanh:
        return map_binary<T>(gate, up, out, [](float g, float u) { return gelu_tanh_f32(g) * u; });
      case ops::UnaryOp::gelu_erf:
        return map_binary<T>(gate, up, out, [](float g, float u) { return gelu_erf_f32(g) * u; });
      default: TERN_ASSERT(false, "gated activation must be silu or gelu");
    }
  });
}

void cast(const Tensor& x, Tensor& out) {
  if (x.dtype() == out.dtype()) {
    out.copy_from(x);
    return;
  }
  dispatch_dtype(x.dtype(), [&](auto src_tag) {
    dispatch_dtype(out.dtype(), [&](auto dst_tag) { cast_typed<decltype(src_tag), decltype(dst_tag)>(x, out); });
  });
}

}  // namespace tern::cpu
