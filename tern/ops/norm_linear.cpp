// ops::norm_linear and ops::norm_gated_linear: pre_norm, then the product; and decode_rows, the MoE
// entry's view of a pre-norm input.
#include "tern/ops/norm_linear.h"

#include "tern/ops/gated_linear.h"
#include "tern/ops/matmul.h"

namespace tern::ops {

DecodeRows decode_rows(const PreNorm& in, const Tensor& w) {
  const Tensor& x = in.x;
  if (!x.defined() || !x.device().is_cuda() || x.dtype() != Dtype::bf16 || x.rank() < 1 || !w.defined() ||
      w.rank() != 2 || w.dtype() != Dtype::bf16 || !w.is_contiguous() || w.device() != x.device() ||
      x.size(-1) != w.size(1) || in.eps < 0.0f)
    return {};
  const int64_t K = w.size(1), rows = K ? x.numel() / K : 0;
  if (rows < 1 || rows > 4) return {};
  if (in.weight.defined() &&
      (in.weight.dtype() != Dtype::bf16 || in.weight.device() != x.device() || in.weight.shape() != Shape{K}))
    return {};
  if (in.delta.defined() &&
      (in.delta.shape() != x.shape() || in.delta.dtype() != x.dtype() || in.delta.device() != x.device()))
    return {};
  return DecodeRows{x.reshape({rows, K}).contiguous(),
                    in.delta.defined() ? in.delta.reshape({rows, K}).contiguous() : Tensor(),
                    in.weight.defined() ? in.weight.contiguous() : Tensor(), rows};
}

AddNorm pre_norm(const PreNorm& in) {
  if (in.delta.defined()) return add_rms_norm(in.x, in.delta, in.weight, in.eps);
  return AddNorm{in.x, rms_norm(in.x, in.weight, in.eps)};
}

NormedProduct norm_linear(const PreNorm& in, const Tensor& w, const Tensor& bias) {
  TERN_CHECK(w.defined() && w.rank() == 2, "[norm_linear] expected w [out, in], got {}",
             w.defined() ? shape_str(w.shape()) : std::string("undefined"));
  AddNorm a = pre_norm(in);
  return NormedProduct{a.sum, linear(a.normed, w, bias)};
}

NormedProduct norm_gated_linear(const PreNorm& in, const Tensor& w, UnaryOp act) {
  TERN_CHECK(act == UnaryOp::silu || act == UnaryOp::gelu_tanh || act == UnaryOp::gelu_erf,
             "[norm_gated_linear] expected a silu or gelu activation, got op {}", static_cast<int>(act));
  TERN_CHECK(w.defined() && w.rank() == 2 && w.size(0) % 2 == 0,
             "[norm_gated_linear] expected w [2 * inter, in], got {}",
             w.defined() ? shape_str(w.shape()) : std::string("undefined"));
  AddNorm a = pre_norm(in);
  return NormedProduct{a.sum, gated_linear(a.normed, w, act)};
}

}  // namespace tern::ops
