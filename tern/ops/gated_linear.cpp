// ops::gated_linear: the one-kernel CUDA path where it applies, else linear then the gated op.
#include "tern/ops/gated_linear.h"

#include "tern/ops/matmul.h"

namespace tern::ops {

Tensor gated_linear(const Tensor& x, const Tensor& w, UnaryOp act) {
  TERN_CHECK(act == UnaryOp::silu || act == UnaryOp::gelu_tanh || act == UnaryOp::gelu_erf,
             "[gated_linear] expected a silu or gelu activation, got op {}", static_cast<int>(act));
  TERN_CHECK(w.defined() && w.rank() == 2 && w.size(0) % 2 == 0, "[gated_linear] expected w [2 * inter, in], got {}",
             w.defined() ? shape_str(w.shape()) : std::string("undefined"));
  const int64_t inter = w.size(0) / 2;
  if (x.defined() && x.device().is_cuda() && x.dtype() == Dtype::bf16 && w.dtype() == Dtype::bf16 && x.rank() >= 1 &&
      x.size(-1) == w.size(1) && w.is_contiguous() && w.device() == x.device()) {
    Shape shape = x.shape();
    shape.back() = inter;
    Tensor out = Tensor::empty(shape, x.dtype(), x.device());
    const int64_t rows = inter ? out.numel() / inter : 0;
    Tensor out2d = out.view({rows, inter});
    if (rows > 0 && cuda::gated_linear(x.reshape({rows, w.size(1)}).contiguous(), w, act, out2d)) return out;
  }
  Tensor y = linear(x, w);
  Tensor g = y.narrow(-1, 0, inter), u = y.narrow(-1, inter, inter);
  return act == UnaryOp::silu ? swiglu(g, u) : geglu(g, u, act == UnaryOp::gelu_tanh);
}

}  // namespace tern::ops
