// Host helpers of the CUDA backend files: kernel Layouts from tensor views (dims coalesced), and the
// checks every entry point shares.
#pragma once
#include <array>
#include <utility>

#include "tern/backend/cuda/kernels/layout.h"
#include "tern/core/tensor.h"

namespace tern::cuda {

using kernels::Layout;

// Coalesces N same-shape operands: size-1 dims dropped, neighbouring dims merged where every
// operand's strides allow. Throws when more than kMaxDims dims remain.
template <size_t N>
std::array<Layout, N> coalesce(const Shape& shape, const std::array<const Strides*, N>& strides) {
  std::array<Layout, N> out{};
  int m = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = m > 0;
    for (size_t k = 0; k < N && merge; ++k) merge = out[k].stride[m - 1] == (*strides[k])[d] * shape[d];
    if (merge) {
      for (size_t k = 0; k < N; ++k) {
        out[k].shape[m - 1] *= shape[d];
        out[k].stride[m - 1] = (*strides[k])[d];
      }
      continue;
    }
    TERN_CHECK(m < kernels::kMaxDims, "[cuda] expected at most {} dims after coalescing, got shape {}",
               kernels::kMaxDims, shape_str(shape));
    for (size_t k = 0; k < N; ++k) {
      out[k].shape[m] = shape[d];
      out[k].stride[m] = (*strides[k])[d];
    }
    ++m;
  }
  for (auto& l : out) l.rank = m;
  return out;
}

inline Layout layout_of(const Tensor& t) { return coalesce<1>(t.shape(), {&t.strides()})[0]; }

inline std::pair<Layout, Layout> coalesce2(const Shape& shape, const Strides& a, const Strides& b) {
  auto l = coalesce<2>(shape, {&a, &b});
  return {l[0], l[1]};
}

// Throws "[op] expected a cuda tensor" unless t is defined and on a CUDA device.
inline void check_cuda(const Tensor& t, const char* op) {
  TERN_CHECK(t.defined() && t.device().is_cuda(), "[{}] expected a cuda tensor, got {}", op,
             t.defined() ? t.device().str() : "an undefined tensor");
}

}  // namespace tern::cuda
