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

Tensor token_logprobs(const Tensor& logits, const Tensor& targets) {
  check_float(logits, "token_logprobs");
  TERN_CHECK(logits.rank() == 2, "[token_logprobs] expected logits [rows, vocab], got shape {}",
             shape_str(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  TERN_CHECK(targets.defined() && targets.dtype() == Dtype::i32 && targets.device().is_cpu() &&
                 targets.shape() == Shape{rows},
             "[token_logprobs] expected targets i32 [{}] on the cpu, got {} {} on {}", rows,
             targets.defined() ? dtype_name(targets.dtype()) : "undefined", shape_str(targets.shape()),
             targets.device().str());
  TERN_CHECK(vocab > 0 && vocab <= std::numeric_limits<int32_t>::max(),
             "[token_logprobs] expected a vocab of 1 to 2^31 - 1 entries, got {}", vocab);
  const Tensor t = targets.contiguous();
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t id = t.data<int32_t>()[r];
    TERN_CHECK(id >= 0 && id < vocab, "[token_logprobs] expected targets in [0, {}), got {} at row {}", vocab, id, r);
  }
  Tensor out = Tensor::empty({rows}, Dtype::f32, logits.device());
  if (rows == 0) return out;
  if (logits.device().is_cpu()) {
    cpu::token_logprobs(logits.contiguous(), t, out);
  } else {
    cuda::token_logprobs(logits.contiguous(), t.to(logits.device()), out);
  }
  return out;
}

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

void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs) {
  TERN_CHECK(logits.defined() && logits.dtype() == Dtype::f32 && logits.rank() == 2 && logits.is_contiguous(),
             "[greedy_choice] expected contiguous f32 logits [B, n], got {} {}",
             logits.defined() ? dtype_name(logits.dtype()) : "undefined",
             logits.defined() ? shape_str(logits.shape()) : "");
  const int64_t b = logits.size(0), n = logits.size(1);
  TERN_CHECK(n > 0 && n <= std::numeric_limits<int32_t>::max(), "[greedy_choice] expected rows of 1 to 2^31 - 1 "
             "logits, got {}", n);
  TERN_CHECK(ids.defined() && ids.dtype() == Dtype::i32 && ids.numel() == b && ids.is_contiguous() &&
                 ids.device() == logits.device(),
             "[greedy_choice] expected ids: contiguous i32 with {} elements on the logits' device", b);
  TERN_CHECK(logprobs.defined() && logprobs.dtype() == Dtype::f32 && logprobs.numel() == b &&
                 logprobs.is_contiguous() && logprobs.device() == logits.device(),
             "[greedy_choice] expected logprobs: contiguous f32 with {} elements on the logits' device", b);
  if (b == 0) return;
  if (logits.device().is_cpu()) {
    cpu::greedy_choice(logits, ids, logprobs);
  } else {
    cuda::greedy_choice(logits, ids, logprobs);
  }
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

namespace {
// op: the op's name for the messages.
Tensor checked_draw_row(const Tensor& logits, float u, const char* op = "draw_index") {
  TERN_CHECK(logits.defined() && logits.dtype() == Dtype::f32 && logits.rank() == 1,
             "[{}] expected f32 logits [n], got {}", op,
             logits.defined() ? dtype_name(logits.dtype()) + std::string(" ") + shape_str(logits.shape()) : "none");
  const int64_t n = logits.size(0);
  TERN_CHECK(n > 0 && n < kDrawMaxIds, "[{}] expected 1 to {} logits, got {}", op, kDrawMaxIds - 1, n);
  TERN_CHECK(u >= 0.0f && u < 1.0f, "[{}] expected u in [0, 1), got {}", op, u);
  return logits.contiguous();
}
}  // namespace

Tensor draw_index(const Tensor& logits, float max_logit, float u) {
  Tensor row = checked_draw_row(logits, u);
  TERN_CHECK(std::isfinite(max_logit), "[draw_index] expected a finite max logit, got {}", max_logit);
  if (row.device().is_cpu()) {
    Tensor out = Tensor::empty({1}, Dtype::i32, row.device());
    cpu::draw_index(row, max_logit, u, out);
    return out;
  }
  return draw_index(row, Tensor::full({1}, max_logit, Dtype::f32).to(row.device()), u);
}

namespace {
void check_one_f32(const Tensor& t, const Tensor& row, const char* what, const char* op = "draw_index") {
  TERN_CHECK(t.defined() && t.dtype() == Dtype::f32 && t.numel() == 1 && t.device() == row.device(),
             "[{}] expected {} as one f32 on {}, got {}", op, what, row.device().str(),
             t.defined() ? dtype_name(t.dtype()) + std::string(" ") + shape_str(t.shape()) + " on " + t.device().str()
                         : "none");
}

Tensor draw_on(const Tensor& row, const Tensor& max_logit, float u, const Tensor* u_dev) {
  check_one_f32(max_logit, row, "the max");
  if (u_dev) check_one_f32(*u_dev, row, "u");
  Tensor out = Tensor::empty({1}, Dtype::i32, row.device());
  if (row.device().is_cpu()) {
    const float m = max_logit.contiguous().data<float>()[0];
    const float uu = u_dev ? u_dev->contiguous().data<float>()[0] : u;
    if (std::isfinite(m) && uu >= 0.0f && uu < 1.0f) {
      cpu::draw_index(row, m, uu, out);
    } else {
      out.data<int32_t>()[0] = static_cast<int32_t>(row.numel() - 1);
    }
  } else {
    const Tensor dev_u = u_dev ? u_dev->contiguous() : Tensor();
    cuda::draw_index(row, max_logit.contiguous(), u, u_dev ? &dev_u : nullptr, out);
  }
  return out;
}
}  // namespace

Tensor draw_index(const Tensor& logits, const Tensor& max_logit, float u) {
  return draw_on(checked_draw_row(logits, u), max_logit, u, nullptr);
}

Tensor draw_index(const Tensor& logits, const Tensor& max_logit, const Tensor& u) {
  return draw_on(checked_draw_row(logits, 0.0f), max_logit, 0.0f, &u);
}

Tensor top_p_mask(const Tensor& logits, const Tensor& max_logit, float top_p, float min_gap) {
  const Tensor row = checked_draw_row(logits, 0.0f, "top_p_mask");
  check_one_f32(max_logit, row, "the max", "top_p_mask");
  TERN_CHECK(top_p > 0.0f && top_p <= 1.0f, "[top_p_mask] expected top_p in (0, 1], got {}", top_p);
  TERN_CHECK(!std::isnan(min_gap), "[top_p_mask] expected a min_gap that is not NaN");
  Tensor out = Tensor::empty({row.numel()}, Dtype::f32, row.device());
  if (row.device().is_cpu()) {
    cpu::top_p_mask(row, max_logit.contiguous().data<float>()[0], top_p, min_gap, out);
  } else {
    cuda::top_p_mask(row, max_logit.contiguous(), top_p, min_gap, out);
  }
  return out;
}

}  // namespace tern::ops
