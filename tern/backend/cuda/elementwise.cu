// Launchers of the element-wise kernels (binary, unary-like, gated, cast, bias add) and the strided
// copy behind Tensor::copy_from / contiguous() on CUDA.
#include <array>
#include <cstdint>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/elementwise.cuh"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {
namespace {
constexpr int kThreads = 256;

bool is_contiguous_layout(const Layout& l, int64_t n) {
  return l.rank == 0 || (l.rank == 1 && l.stride[0] == 1 && l.shape[0] == n);
}

// The layouts (coalesced together, one shape) counted in 16-byte vectors of `elem`-byte elements, where
// every operand's innermost dim is contiguous and a whole number of vectors, its other strides are whole
// vectors and its pointer is 16-byte aligned: a copy or gated product then moves 16 bytes per index
// computation instead of one element. Returns false, leaving them as they are, otherwise.
template <size_t N>
bool to_vectors(std::array<Layout*, N> ls, std::array<const void*, N> ptrs, size_t elem) {
  const int64_t v = static_cast<int64_t>(16 / elem);
  for (size_t k = 0; k < N; ++k) {
    const Layout& l = *ls[k];
    if (elem > 16 || l.rank == 0 || reinterpret_cast<uintptr_t>(ptrs[k]) % 16 != 0) return false;
    if (l.stride[l.rank - 1] != 1 || l.shape[l.rank - 1] % v != 0) return false;
    for (int d = 0; d + 1 < l.rank; ++d)
      if (l.stride[d] % v != 0) return false;
  }
  for (Layout* l : ls) {
    l->shape[l->rank - 1] /= v;
    for (int d = 0; d + 1 < l->rank; ++d) l->stride[d] /= v;
  }
  return true;
}
}  // namespace

void launch_strided_copy(const void* src, const Layout& ls_in, void* dst, const Layout& ld_in, int64_t n, size_t elem,
                         cudaStream_t s) {
  Layout ls = ls_in, ld = ld_in;
  if (to_vectors<2>({&ls, &ld}, {src, dst}, elem)) {
    const int64_t nv = n / static_cast<int64_t>(16 / elem);
    launch_kernel(kernels::strided_copy_kernel<uint4>, grid_for(nv, kThreads), kThreads, 0, s,
                  static_cast<const uint4*>(src), ls, static_cast<uint4*>(dst), ld, nv);
    return;
  }
  const unsigned grid = grid_for(n, kThreads);
  switch (elem) {
    case 1:
      launch_kernel(kernels::strided_copy_kernel<uint8_t>, grid, kThreads, 0, s, static_cast<const uint8_t*>(src), ls,
                    static_cast<uint8_t*>(dst), ld, n);
      break;
    case 2:
      launch_kernel(kernels::strided_copy_kernel<uint16_t>, grid, kThreads, 0, s, static_cast<const uint16_t*>(src), ls,
                    static_cast<uint16_t*>(dst), ld, n);
      break;
    case 4:
      launch_kernel(kernels::strided_copy_kernel<uint32_t>, grid, kThreads, 0, s, static_cast<const uint32_t*>(src), ls,
                    static_cast<uint32_t*>(dst), ld, n);
      break;
    default:
      launch_kernel(kernels::strided_copy_kernel<uint64_t>, grid, kThreads, 0, s, static_cast<const uint64_t*>(src), ls,
                    static_cast<uint64_t*>(dst), ld, n);
      break;
  }
}

void launch_binary(Dtype dt, int op, const void* a, const Layout& la, const void* b, const Layout& lb, void* out,
                   int64_t n, cudaStream_t s) {
  dispatch_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = grid_for(n, kThreads);
    if (is_contiguous_layout(la, n) && is_contiguous_layout(lb, n)) {
      launch_kernel(kernels::binary_contig_kernel<T>, grid, kThreads, 0, s, op, static_cast<const T*>(a),
                    static_cast<const T*>(b), static_cast<T*>(out), n);
    } else {
      launch_kernel(kernels::binary_kernel<T>, grid, kThreads, 0, s, op, static_cast<const T*>(a), la,
                    static_cast<const T*>(b), lb, static_cast<T*>(out), n);
    }
  });
}

void launch_unary(Dtype dt, int op, const void* x, const Layout& lx, void* out, int64_t n, float p0, float p1,
                  cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (is_contiguous_layout(lx, n)) {
      launch_kernel(kernels::unary_kernel<T, true>, grid_for(n, kThreads), kThreads, 0, s, op, static_cast<const T*>(x),
                    lx, static_cast<T*>(out), n, p0, p1);
    } else {
      launch_kernel(kernels::unary_kernel<T, false>, grid_for(n, kThreads), kThreads, 0, s, op,
                    static_cast<const T*>(x), lx, static_cast<T*>(out), n, p0, p1);
    }
  });
}

void launch_gated(Dtype dt, int act, const void* gate, const Layout& lg, const void* up, const Layout& lu, void* out,
                  int64_t n, cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    Layout vg = lg, vu = lu;
    if (reinterpret_cast<uintptr_t>(out) % 16 == 0 && to_vectors<2>({&vg, &vu}, {gate, up}, sizeof(T))) {
      const int64_t nv = n / static_cast<int64_t>(16 / sizeof(T));
      launch_kernel(kernels::gated_vec_kernel<T>, grid_for(nv, kThreads), kThreads, 0, s, act,
                    static_cast<const T*>(gate), vg, static_cast<const T*>(up), vu, static_cast<T*>(out), nv);
    } else if (is_contiguous_layout(lg, n) && is_contiguous_layout(lu, n)) {
      launch_kernel(kernels::gated_kernel<T, true>, grid_for(n, kThreads), kThreads, 0, s, act,
                    static_cast<const T*>(gate), lg, static_cast<const T*>(up), lu, static_cast<T*>(out), n);
    } else {
      launch_kernel(kernels::gated_kernel<T, false>, grid_for(n, kThreads), kThreads, 0, s, act,
                    static_cast<const T*>(gate), lg, static_cast<const T*>(up), lu, static_cast<T*>(out), n);
    }
  });
}

void launch_cast(Dtype src_dt, const void* x, const Layout& lx, Dtype dst_dt, void* out, int64_t n, cudaStream_t s) {
  dispatch_numeric(src_dt, [&](auto stag) {
    using S = decltype(stag);
    dispatch_numeric(dst_dt, [&](auto dtag) {
      using D = decltype(dtag);
      if (is_contiguous_layout(lx, n)) {
        launch_kernel(kernels::cast_kernel<S, D, true>, grid_for(n, kThreads), kThreads, 0, s, static_cast<const S*>(x),
                      lx, static_cast<D*>(out), n);
      } else {
        launch_kernel(kernels::cast_kernel<S, D, false>, grid_for(n, kThreads), kThreads, 0, s,
                      static_cast<const S*>(x), lx, static_cast<D*>(out), n);
      }
    });
  });
}

void launch_add_bias(Dtype out_dt, void* out, Dtype bias_dt, const void* bias, int64_t rows, int64_t cols,
                     cudaStream_t s) {
  dispatch_float(out_dt, [&](auto otag) {
    using T = decltype(otag);
    dispatch_float(bias_dt, [&](auto btag) {
      using B = decltype(btag);
      launch_kernel(kernels::add_bias_kernel<T, B>, grid_for(rows * cols, kThreads), kThreads, 0, s,
                    static_cast<T*>(out), static_cast<const B*>(bias), rows, cols);
    });
  });
}

}  // namespace tern::cuda
