// Matrix products: shape, dtype and device validation, output allocation, backend dispatch.
#include "tern/ops/matmul.h"

namespace tern::ops {
namespace {

bool is_float_dtype(Dtype d) { return d == Dtype::f32 || d == Dtype::bf16 || d == Dtype::f16; }

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  TERN_CHECK(a.defined() && b.defined(), "[matmul] expected defined tensors, got an undefined operand");
  TERN_CHECK(a.rank() >= 2, "[matmul] expected a of rank >= 2, got shape {}", shape_str(a.shape()));
  TERN_CHECK(b.rank() >= 2, "[matmul] expected b of rank >= 2, got shape {}", shape_str(b.shape()));
  TERN_CHECK(a.dtype() == b.dtype(), "[matmul] expected a and b of one dtype, got {} and {}", dtype_name(a.dtype()),
             dtype_name(b.dtype()));
  TERN_CHECK(is_float_dtype(a.dtype()), "[matmul] expected f32, bf16 or f16, got {}", dtype_name(a.dtype()));
  TERN_CHECK(a.device() == b.device(), "[matmul] expected a and b on one device, got {} and {}", a.device().str(),
             b.device().str());
  const int64_t m = trans_a ? a.size(-1) : a.size(-2);
  const int64_t ka = trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  TERN_CHECK(ka == kb, "[matmul] expected matching inner dims, got a {}{} and b {}{}", shape_str(a.shape()),
             trans_a ? "^T" : "", shape_str(b.shape()), trans_b ? "^T" : "");
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape out_shape = broadcast_shapes(batch_a, batch_b, "matmul");
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (a.device().is_cpu()) {
    cpu::matmul(a, b, trans_a, trans_b, out);
  } else {
    cuda::matmul(a, b, trans_a, trans_b, out);
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  TERN_CHECK(x.defined(), "[linear] expected defined x and w, got an undefined operand");
  return linear(x, w, bias, x.dtype());
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, Dtype out_dtype) {
  TERN_CHECK(x.defined() && w.defined(), "[linear] expected defined x and w, got an undefined operand");
  TERN_CHECK(x.rank() >= 1, "[linear] expected x of rank >= 1, got a scalar");
  TERN_CHECK(w.rank() == 2, "[linear] expected w [out, in], got shape {}", shape_str(w.shape()));
  const int64_t in = w.size(1), out_features = w.size(0);
  TERN_CHECK(x.size(-1) == in, "[linear] expected x [..., {}] for w {}, got {}", in, shape_str(w.shape()),
             shape_str(x.shape()));
  TERN_CHECK(is_float_dtype(x.dtype()), "[linear] expected x f32, bf16 or f16, got {}", dtype_name(x.dtype()));
  TERN_CHECK(is_float_dtype(w.dtype()), "[linear] expected w f32, bf16 or f16, got {}", dtype_name(w.dtype()));
  TERN_CHECK(x.device() == w.device(), "[linear] expected x and w on one device, got {} and {}", x.device().str(),
             w.device().str());
  if (bias.defined()) {
    TERN_CHECK(bias.rank() == 1 && bias.size(0) == out_features, "[linear] expected bias [{}], got {}",
               out_features, shape_str(bias.shape()));
    TERN_CHECK(is_float_dtype(bias.dtype()), "[linear] expected bias f32, bf16 or f16, got {}",
               dtype_name(bias.dtype()));
    TERN_CHECK(bias.device() == x.device(), "[linear] expected bias on {}, got {}", x.device().str(),
               bias.device().str());
  }
  TERN_CHECK(out_dtype == x.dtype() || out_dtype == Dtype::f32, "[linear] expected an output in {} or f32, got {}",
             dtype_name(x.dtype()), dtype_name(out_dtype));
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = Tensor::empty(out_shape, out_dtype, x.device());
  if (out.numel() == 0) return out;
  const int64_t tokens = out.numel() / out_features;
  Tensor x2d = x.reshape({tokens, in}).contiguous();
  Tensor out2d = out.view({tokens, out_features});
  if (x.device().is_cpu()) {
    cpu::linear(x2d, w, bias, out2d);
  } else {
    cuda::linear(x2d, w, bias, out2d);
  }
  return out;
}

}  // namespace tern::ops
