// Reductions: validation, result shapes and allocation; the math lives in the backends.
#include "tern/ops/reduce.h"

#include <cmath>
#include <limits>
#include <string>

#include "tern/base/draw_weight.h"

namespace tern::ops {
namespace {

void check_float(const Tensor& x, const char* op) {
  TERN_CHECK(x.defined(), "[{}] expected a defined tensor, got an undefined one", op);
  TERN_CHECK(is_floating(x.dtype()), "[{}] expected a float dtype (f32, bf16, f16), got {}", op,
             dtype_name(x.dtype()));
}

Shape reduced_shape(const Shape& s, int dim, bool keepdim) {
  Shape out = s;
  if (keepdim) {
    out[dim] = 1;
  } else {
    out.erase(out.begin() + dim);
  }
  return out;
}

Tensor softmax_op(const Tensor& x, int64_t dim, bool log, const char* name) {
  check_float(x, name);
  const int d = normalize_dim(dim, x.rank(), name);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::softmax(x, d, log, out);
  } else {
    cuda::softmax(x, d, log, out);
  }
  return out;
}

Tensor reduce_op(const Tensor& x, int64_t dim, bool keepdim, ReduceOp op, const char* name) {
  check_float(x, name);
  const int d = normalize_dim(dim, x.rank(), name);
  TERN_CHECK(op != ReduceOp::max || x.shape()[d] > 0, "[{}] expected a non-empty dim {}, got shape {}", name, d,
             shape_str(x.shape()));
  Tensor out = Tensor::empty(reduced_shape(x.shape(), d, keepdim), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::reduce(x, d, op, out);
  } else {
    cuda::reduce(x, d, op, out);
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true, "log_softmax"); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return reduce_op(x, dim, keepdim, ReduceOp::sum, "sum"); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return reduce_op(x, dim, keepdim, ReduceOp::mean, "mean"); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return reduce_op(x, dim, keepdim, ReduceOp::max, "max"); }

Tensor argmax(const Tensor& x, int64_t dim) {
  check_float(x, "argmax");
  const int d = normalize_dim(dim, x.rank(), "argmax");
  const int64_t n = x.shape()[d];
  TERN_CHECK(n > 0, "[argmax] expected a non-empty dim {}, got shape {}", d, shape_str(x.shape()));
  TERN_CHECK(n <= std::numeric_limits<int32_t>::max(), "[argmax] expected a dim of at most 2^31 - 1, got {}", n);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), d, false), Dtype::i32, x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::argmax(x, d, out);
  } else {
    cuda::argmax(x, d, out);
  }
  return out;
}

TopK topk(const Tensor& x, int64_t k, int64_t dim) {
  check_float(x, "topk");
  const int d = normalize_dim(dim, x.rank(), "topk");
  const int64_t n = x.shape()[d];
  TERN_CHECK(k >= 0 && k <= n, "[topk] expected k in [0, {}], got {}", n, k);
  TERN_CHECK(n <= std::numeric_limits<int32_t>::max(), "[topk] expected a dim of at most 2^31 - 1, got {}", n);
  Shape s = x.shape();
  s[d] = k;
  TopK r{Tensor::empty(s, x.dtype(), x.device()), Tensor::empty(s, Dtype::i32, x.device())};
  if (r.values.numel() == 0) return r;
  if (x.device().is_cpu()) {
    cpu::topk(x, k, d, r.values, r.indices);
  } else {
    cuda::topk(x, k, d, r.values, r.indices);
  }
  return r;
}

Tensor draw_index(const Tensor& logits, float max_logit, float u) {
  TERN_CHECK(logits.defined() && logits.dtype() == Dtype::f32 && logits.rank() == 1,
             "[draw_index] expected f32 logits [n], got {}",
             logits.defined() ? dtype_name(logits.dtype()) + std::string(" ") + shape_str(logits.shape()) : "none");
  const int64_t n = logits.size(0);
  TERN_CHECK(n > 0 && n < kDrawMaxIds, "[draw_index] expected 1 to {} logits, got {}", kDrawMaxIds - 1, n);
  TERN_CHECK(std::isfinite(max_logit), "[draw_index] expected a finite max logit, got {}", max_logit);
  TERN_CHECK(u >= 0.0f && u < 1.0f, "[draw_index] expected u in [0, 1), got {}", u);
  Tensor out = Tensor::empty({1}, Dtype::i32, logits.device());
  Tensor row = logits.contiguous();
  if (row.device().is_cpu()) {
    cpu::draw_index(row, max_logit, u, out);
  } else {
    cuda::draw_index(row, max_logit, u, out);
  }
  return out;
}

}  // namespace tern::ops
