// Element-wise ops: broadcasting binary arithmetic, unary activations, fused gated activations, cast.
// Float math runs in f32 whatever the storage dtype; results keep the input dtype unless stated.
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

enum class BinaryOp { add, sub, mul, div, maximum, minimum };
enum class UnaryOp { neg, exp, log, sqrt, rsqrt, tanh, sigmoid, silu, gelu_tanh, gelu_erf, relu, softplus, abs, square };

// a OP b with NumPy broadcasting; a and b must share dtype and device. [broadcast(a, b)]
Tensor binary(const Tensor& a, const Tensor& b, BinaryOp op);
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(a, b, BinaryOp::add); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(a, b, BinaryOp::sub); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(a, b, BinaryOp::mul); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(a, b, BinaryOp::div); }

// In place: a = a OP b, b broadcast to a's shape; a must be contiguous.
void binary_(Tensor& a, const Tensor& b, BinaryOp op);

// OP(x) element-wise on a float tensor.
Tensor unary(const Tensor& x, UnaryOp op);
inline Tensor silu(const Tensor& x) { return unary(x, UnaryOp::silu); }
inline Tensor sigmoid(const Tensor& x) { return unary(x, UnaryOp::sigmoid); }
inline Tensor gelu(const Tensor& x, bool tanh_approx) { return unary(x, tanh_approx ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf); }

// x * mul + add, element-wise with scalars.
Tensor affine(const Tensor& x, float mul, float add = 0.0f);
inline Tensor scale(const Tensor& x, float s) { return affine(x, s, 0.0f); }
// cap * tanh(x / cap) (Gemma's logit softcap).
Tensor softcap(const Tensor& x, float cap);

// act(gate) * up with act = silu (SwiGLU) or gelu (GeGLU); gate and up share shape. [.., F]
Tensor swiglu(const Tensor& gate, const Tensor& up);
Tensor geglu(const Tensor& gate, const Tensor& up, bool tanh_approx);

// Converts every element to dtype (round to nearest even for bf16/f16; truncation toward zero for ints).
Tensor cast(const Tensor& x, Dtype dtype);

}  // namespace tern::ops

// Backend entry points. Inputs are validated by ops/; out is allocated, contiguous, of the result shape.
namespace tern::cpu {
void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, Tensor& out);
void unary(const Tensor& x, ops::UnaryOp op, Tensor& out);
void affine(const Tensor& x, float mul, float add, Tensor& out);
void softcap(const Tensor& x, float cap, Tensor& out);
void gated(const Tensor& gate, const Tensor& up, ops::UnaryOp act, Tensor& out);
void cast(const Tensor& x, Tensor& out);
}  // namespace tern::cpu
namespace tern::cuda {
void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, Tensor& out);
void unary(const Tensor& x, ops::UnaryOp op, Tensor& out);
void affine(const Tensor& x, float mul, float add, Tensor& out);
void softcap(const Tensor& x, float cap, Tensor& out);
void gated(const Tensor& gate, const Tensor& up, ops::UnaryOp act, Tensor& out);
void cast(const Tensor& x, Tensor& out);
}  // namespace tern::cuda
