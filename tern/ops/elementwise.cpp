// Element-wise ops: validation, broadcasting and output allocation; the math lives in the backends.
#include "tern/ops/elementwise.h"

namespace tern::ops {
namespace {

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
  }
  return "binary";
}

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::silu: return "silu";
    case UnaryOp::gelu_tanh: return "gelu_tanh";
    case UnaryOp::gelu_erf: return "gelu_erf";
    case UnaryOp::relu: return "relu";
    case UnaryOp::softplus: return "softplus";
    case UnaryOp::abs: return "abs";
    case UnaryOp::square: return "square";
  }
  return "unary";
}

void check_defined(const Tensor& t, const char* op) {
  TERN_CHECK(t.defined(), "[{}] expected a defined tensor, got an undefined one", op);
}

void check_float(const Tensor& t, const char* op) {
  check_defined(t, op);
  TERN_CHECK(is_floating(t.dtype()), "[{}] expected a float dtype (f32, bf16, f16), got {}", op,
             dtype_name(t.dtype()));
}

void check_same_kind(const Tensor& a, const Tensor& b, const char* op) {
  TERN_CHECK(a.dtype() == b.dtype(), "[{}] expected operands of one dtype, got {} and {}", op, dtype_name(a.dtype()),
             dtype_name(b.dtype()));
  TERN_CHECK(a.device() == b.device(), "[{}] expected operands on one device, got {} and {}", op, a.device().str(),
             b.device().str());
}

void check_binary_dtype(const Tensor& a, BinaryOp op) {
  const char* name = binary_name(op);
  Dtype d = a.dtype();
  bool is_int = d == Dtype::i32 || d == Dtype::i64;
  TERN_CHECK(is_floating(d) || (is_int && op != BinaryOp::div),
             "[{}] expected f32, bf16, f16 (or i32, i64 except for div), got {}", name, dtype_name(d));
}

}  // namespace

Tensor binary(const Tensor& a, const Tensor& b, BinaryOp op) {
  const char* name = binary_name(op);
  check_defined(a, name);
  check_defined(b, name);
  check_same_kind(a, b, name);
  check_binary_dtype(a, op);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  // Broadcast views only where needed: equal shapes pass through without a copy of the metadata.
  Tensor atmp, btmp;
  const Tensor& ab = a.shape() == shape ? a : (atmp = a.broadcast_to(shape));
  const Tensor& bb = b.shape() == shape ? b : (btmp = b.broadcast_to(shape));
  if (a.device().is_cpu()) {
    cpu::binary(ab, bb, op, out);
  } else {
    cuda::binary(ab, bb, op, out);
  }
  return out;
}

void binary_(Tensor& a, const Tensor& b, BinaryOp op) {
  const char* name = binary_name(op);
  check_defined(a, name);
  check_defined(b, name);
  check_same_kind(a, b, name);
  check_binary_dtype(a, op);
  TERN_CHECK(a.is_contiguous(), "[{}] expected a contiguous destination, got shape {} strides {}", name,
             shape_str(a.shape()), shape_str(a.strides()));
  TERN_CHECK(broadcast_shapes(a.shape(), b.shape(), name) == a.shape(),
             "[{}] expected an operand broadcastable to {}, got {}", name, shape_str(a.shape()), shape_str(b.shape()));
  if (a.numel() == 0) return;
  Tensor btmp;
  const Tensor& bb = b.shape() == a.shape() ? b : (btmp = b.broadcast_to(a.shape()));
  if (a.device().is_cpu()) {
    cpu::binary(a, bb, op, a);
  } else {
    cuda::binary(a, bb, op, a);
  }
}

Tensor unary(const Tensor& x, UnaryOp op) {
  check_float(x, unary_name(op));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::unary(x, op, out);
  } else {
    cuda::unary(x, op, out);
  }
  return out;
}

Tensor affine(const Tensor& x, float mul, float add) {
  check_float(x, "affine");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::affine(x, mul, add, out);
  } else {
    cuda::affine(x, mul, add, out);
  }
  return out;
}

Tensor softcap(const Tensor& x, float cap) {
  check_float(x, "softcap");
  TERN_CHECK(cap > 0.0f, "[softcap] expected a positive cap, got {}", cap);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::softcap(x, cap, out);
  } else {
    cuda::softcap(x, cap, out);
  }
  return out;
}

namespace {
Tensor gated_op(const Tensor& gate, const Tensor& up, UnaryOp act, const char* name) {
  check_float(gate, name);
  check_defined(up, name);
  check_same_kind(gate, up, name);
  TERN_CHECK(gate.shape() == up.shape(), "[{}] expected up of shape {}, got {}", name, shape_str(gate.shape()),
             shape_str(up.shape()));
  Tensor out = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  if (out.numel() == 0) return out;
  if (gate.device().is_cpu()) {
    cpu::gated(gate, up, act, out);
  } else {
    cuda::gated(gate, up, act, out);
  }
  return out;
}
}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) { return gated_op(gate, up, UnaryOp::silu, "swiglu"); }

Tensor geglu(const Tensor& gate, const Tensor& up, bool tanh_approx) {
  return gated_op(gate, up, tanh_approx ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, "geglu");
}

Tensor cast(const Tensor& x, Dtype dtype) {
  check_defined(x, "cast");
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::cast(x, out);
  } else {
    cuda::cast(x, out);
  }
  return out;
}

}  // namespace tern::ops
