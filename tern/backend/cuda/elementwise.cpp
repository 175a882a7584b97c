// CUDA element-wise entry points: validate placement, build strided layouts, launch.
#include "tern/ops/elementwise.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

// The kernels take the op enums as ints (kernels/elementwise.cuh spells the same order).
static_assert(static_cast<int>(ops::BinaryOp::minimum) == 5 && static_cast<int>(ops::UnaryOp::square) == 13,
              "kernels/elementwise.cuh op codes must follow ops::BinaryOp / ops::UnaryOp");
static_assert(static_cast<int>(ops::UnaryOp::silu) == 7 && static_cast<int>(ops::UnaryOp::gelu_tanh) == 8 &&
              static_cast<int>(ops::UnaryOp::gelu_erf) == 9, "gated activations' codes");

void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, Tensor& out) {
  check_cuda(a, "binary");
  check_cuda(b, "binary");
  auto l = coalesce<3>(out.shape(), {&a.strides(), &b.strides(), &out.strides()});
  launch_binary(a.dtype(), static_cast<int>(op), a.data_ptr(), l[0], b.data_ptr(), l[1], out.data_ptr(), out.numel(),
                stream());
}

void unary(const Tensor& x, ops::UnaryOp op, Tensor& out) {
  check_cuda(x, "unary");
  launch_unary(x.dtype(), static_cast<int>(op), x.data_ptr(), layout_of(x), out.data_ptr(), out.numel(), 0.0f, 0.0f,
               stream());
}

void affine(const Tensor& x, float mul, float add, Tensor& out) {
  check_cuda(x, "affine");
  launch_unary(x.dtype(), kOpAffine, x.data_ptr(), layout_of(x), out.data_ptr(), out.numel(), mul, add, stream());
}

void softcap(const Tensor& x, float cap, Tensor& out) {
  check_cuda(x, "softcap");
  launch_unary(x.dtype(), kOpSoftcap, x.data_ptr(), layout_of(x), out.data_ptr(), out.numel(), cap, 0.0f, stream());
}

void gated(const Tensor& gate, const Tensor& up, ops::UnaryOp act, Tensor& out) {
  check_cuda(gate, "gated");
  check_cuda(up, "gated");
  auto l = coalesce<2>(out.shape(), {&gate.strides(), &up.strides()});
  launch_gated(gate.dtype(), static_cast<int>(act), gate.data_ptr(), l[0], up.data_ptr(), l[1], out.data_ptr(),
               out.numel(), stream());
}

void cast(const Tensor& x, Tensor& out) {
  check_cuda(x, "cast");
  launch_cast(x.dtype(), x.data_ptr(), layout_of(x), out.dtype(), out.data_ptr(), out.numel(), stream());
}

}  // namespace tern::cuda
