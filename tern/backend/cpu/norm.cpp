// CPU RMSNorm over the last dim: f32 sum of squares, one row per task.
#include <cmath>
#include <type_traits>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/norm.h"

namespace tern::cpu {
namespace {

using detail::RowLayout;

// W is the weight's storage type, or void for the scale-free norm.
template <typename T, typename W>
void rms_norm_typed(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const W* pw = nullptr;
  int64_t sw = 0;
  if constexpr (!std::is_void_v<W>) {
    pw = static_cast<const W*>(weight.data_ptr());
    sw = weight.stride(0);
  }
  RowLayout<2> lay(x.shape(), {&x, &out}, false);
  const int64_t d = lay.inner, sx = lay.inner_stride[0], so = lay.inner_stride[1];
  lay.parallel_rows([&](const int64_t* o, int64_t) {
    const T* xs = px + o[0];
    T* os = po + o[1];
    float ss = 0.0f;
    if (sx == 1) {
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < d; ++i) {
        float v = static_cast<float>(xs[i]);
        ss += v * v;
      }
    } else {
      for (int64_t i = 0; i < d; ++i) {
        float v = static_cast<float>(xs[i * sx]);
        ss += v * v;
      }
    }
    // As HF: x * rsqrt(mean(x^2) + eps), then the weight.
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    if constexpr (std::is_void_v<W>) {
      for (int64_t i = 0; i < d; ++i) os[i * so] = T(static_cast<float>(xs[i * sx]) * inv);
    } else if (sx == 1 && so == 1 && sw == 1) {
      for (int64_t i = 0; i < d; ++i) os[i] = T(static_cast<float>(xs[i]) * inv * static_cast<float>(pw[i]));
    } else {
      for (int64_t i = 0; i < d; ++i) {
        os[i * so] = T(static_cast<float>(xs[i * sx]) * inv * static_cast<float>(pw[i * sw]));
      }
    }
  });
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  detail::dispatch_float(x.dtype(), [&](auto xt) {
    using T = decltype(xt);
    if (!weight.defined()) {
      rms_norm_typed<T, void>(x, weight, eps, out);
      return;
    }
    detail::dispatch_float(weight.dtype(), [&](auto wt) { rms_norm_typed<T, decltype(wt)>(x, weight, eps, out); });
  });
}

}  // namespace tern::cpu
