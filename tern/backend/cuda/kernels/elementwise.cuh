// Element-wise kernels: strided gather into contiguous output for binary, unary-like (unary, affine,
// softcap), gated (SwiGLU/GeGLU) and cast; plus the row bias add and the strided copy.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"

namespace tern::cuda::kernels {

// Op codes mirror ops::BinaryOp / ops::UnaryOp (kept in sync by static_asserts in elementwise.cpp).
enum BinaryCode { kAdd = 0, kSub, kMul, kDiv, kMaximum, kMinimum };
enum UnaryCode {
  kNeg = 0, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kSilu, kGeluTanh, kGeluErf, kRelu, kSoftplus, kAbs, kSquare,
  kAffineCode = 100, kSoftcapCode = 101
};

__device__ __forceinline__ float gelu_tanh_f(float x) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
}

__device__ __forceinline__ float unary_f(int op, float x, float p0, float p1) {
  switch (op) {
    case kNeg: return -x;
    case kExp: return expf(x);
    case kLog: return logf(x);
    case kSqrt: return sqrtf(x);
    case kRsqrt: return 1.0f / sqrtf(x);
    case kTanh: return tanhf(x);
    case kSigmoid: return 1.0f / (1.0f + expf(-x));
    case kSilu: return x / (1.0f + expf(-x));
    case kGeluTanh: return gelu_tanh_f(x);
    case kGeluErf: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case kRelu: return x > 0.0f ? x : 0.0f;
    case kSoftplus: return x > 20.0f ? x : log1pf(expf(x));
    case kAbs: return fabsf(x);
    case kSquare: return x * x;
    case kAffineCode: return x * p0 + p1;
    case kSoftcapCode: return p0 * tanhf(x / p0);
  }
  return x;
}

template <typename T>
__device__ __forceinline__ T binary_v(int op, T a, T b) {
  if constexpr (IsFloat<T>::value) {
    float x = to_f32(a), y = to_f32(b), r = 0.0f;
    switch (op) {
      case kAdd: r = x + y; break;
      case kSub: r = x - y; break;
      case kMul: r = x * y; break;
      case kDiv: r = x / y; break;
      case kMaximum: r = fmaxf(x, y); break;
      case kMinimum: r = fminf(x, y); break;
    }
    return from_f32<T>(r);
  } else {
    switch (op) {
      case kAdd: return a + b;
      case kSub: return a - b;
      case kMul: return a * b;
      case kDiv: return b == 0 ? T(0) : a / b;
      case kMaximum: return a > b ? a : b;
      case kMinimum: return a < b ? a : b;
    }
    return a;
  }
}

template <typename T>
__global__ void binary_kernel(int op, const T* __restrict__ a, Layout la, const T* __restrict__ b, Layout lb,
                              T* __restrict__ out, int64_t n) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = binary_v<T>(op, a[offset_of(la, i)], b[offset_of(lb, i)]);
  }
}

// Both operands contiguous: no index arithmetic.
template <typename T>
__global__ void binary_contig_kernel(int op, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                     int64_t n) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = binary_v<T>(op, a[i], b[i]);
  }
}

// kContig: the input is contiguous, so element i sits at offset i (no index arithmetic).
template <typename T, bool kContig>
__global__ void unary_kernel(int op, const T* __restrict__ x, Layout lx, T* __restrict__ out, int64_t n, float p0,
                             float p1) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_f32<T>(unary_f(op, to_f32(x[kContig ? i : offset_of(lx, i)]), p0, p1));
  }
}

template <typename T, bool kContig>
__global__ void gated_kernel(int act, const T* __restrict__ gate, Layout lg, const T* __restrict__ up, Layout lu,
                             T* __restrict__ out, int64_t n) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float g = to_f32(gate[kContig ? i : offset_of(lg, i)]);
    float u = to_f32(up[kContig ? i : offset_of(lu, i)]);
    out[i] = from_f32<T>(unary_f(act, g, 0.0f, 0.0f) * u);
  }
}

// gated_kernel over 16-byte vectors of V = 16 / sizeof(T) elements: lg and lu count in vectors (see
// to_vectors in elementwise.cu), out is contiguous, n vectors.
template <typename T>
__global__ void gated_vec_kernel(int act, const T* __restrict__ gate, Layout lg, const T* __restrict__ up, Layout lu,
                                 T* __restrict__ out, int64_t n) {
  grid_dependency_wait();
  constexpr int V = 16 / sizeof(T);
  union Vec {
    uint4 u;
    T e[V];
  };
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    Vec g, u, o;
    g.u = __ldg(reinterpret_cast<const uint4*>(gate) + offset_of(lg, i));
    u.u = __ldg(reinterpret_cast<const uint4*>(up) + offset_of(lu, i));
#pragma unroll
    for (int j = 0; j < V; ++j) o.e[j] = from_f32<T>(unary_f(act, to_f32(g.e[j]), 0.0f, 0.0f) * to_f32(u.e[j]));
    reinterpret_cast<uint4*>(out)[i] = o.u;
  }
}

template <typename S, typename D>
__device__ __forceinline__ D convert(S v) {
  if constexpr (IsFloat<D>::value) {
    if constexpr (IsFloat<S>::value) {
      return from_f32<D>(to_f32(v));
    } else {
      return from_f32<D>(static_cast<float>(v));
    }
  } else {
    if constexpr (IsFloat<S>::value) {
      float f = to_f32(v);
      return f != f ? D(0) : static_cast<D>(truncf(f));
    } else {
      return static_cast<D>(v);
    }
  }
}

template <typename S, typename D, bool kContig>
__global__ void cast_kernel(const S* __restrict__ x, Layout lx, D* __restrict__ out, int64_t n) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = convert<S, D>(x[kContig ? i : offset_of(lx, i)]);
  }
}

template <typename T, typename B>
__global__ void add_bias_kernel(T* __restrict__ out, const B* __restrict__ bias, int64_t rows, int64_t cols) {
  grid_dependency_wait();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_f32<T>(to_f32(out[i]) + to_f32(bias[i % cols]));
  }
}

// Element-size generic copy (U an unsigned type of that size; uint4 for the layouts in 16-byte vectors).
template <typename U>
__global__ void strided_copy_kernel(const U* __restrict__ src, Layout ls, U* __restrict__ dst, Layout ld, int64_t n) {
  grid_dependency_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[offset_of(ld, i)] = src[offset_of(ls, i)];
  }
}

}  // namespace tern::cuda::kernels
