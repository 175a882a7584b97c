// CUDA reduction entry points: x made contiguous and seen as [outer, n, inner] around dim.
#include "tern/ops/reduce.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/base/draw_weight.h"

namespace tern::cuda {
namespace {

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split split_at(const Tensor& x, int dim) {
  Split s;
  for (int d = 0; d < static_cast<int>(x.rank()); ++d) {
    if (d < dim) s.outer *= x.size(d);
    else if (d == dim) s.n = x.size(d);
    else s.inner *= x.size(d);
  }
  return s;
}

// Scratch of `bytes` on x's device, kept alive by `keep`; nullptr when none is needed.
void* scratch(size_t bytes, const Tensor& x, Tensor& keep) {
  if (bytes == 0) return nullptr;
  keep = Tensor::empty({static_cast<int64_t>(bytes)}, Dtype::u8, x.device());
  return keep.data_ptr();
}

}  // namespace

void softmax(const Tensor& x, int dim, bool log, Tensor& out) {
  check_cuda(x, "softmax");
  if (x.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  Tensor keep;
  void* ws = scratch(s.inner == 1 ? row_workspace_bytes(s.outer, s.n) : 0, x, keep);
  launch_softmax(xc.dtype(), xc.data_ptr(), out.data_ptr(), s.outer, s.n, s.inner, log, ws, stream());
}

void reduce(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out) {
  check_cuda(x, "reduce");
  if (out.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(s.n > 0, "[reduce] expected a non-empty dim {}, got shape {}", dim, shape_str(x.shape()));
  Tensor keep;
  void* ws = scratch(s.inner == 1 ? row_workspace_bytes(s.outer, s.n) : 0, x, keep);
  launch_reduce(xc.dtype(), static_cast<int>(op), xc.data_ptr(), out.data_ptr(), s.outer, s.n, s.inner, ws, stream());
}

void argmax(const Tensor& x, int dim, Tensor& out) {
  check_cuda(x, "argmax");
  if (out.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(s.n > 0, "[argmax] expected a non-empty dim {}, got shape {}", dim, shape_str(x.shape()));
  Tensor keep;
  void* ws = scratch(s.inner == 1 ? argmax_workspace_bytes(s.outer, s.n) : 0, x, keep);
  launch_argmax(xc.dtype(), xc.data_ptr(), out.data<int32_t>(), s.outer, s.n, s.inner, ws, stream());
}

void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs) {
  check_cuda(logits, "greedy_choice");
  const int64_t lines = logits.size(0), n = logits.size(1);
  Tensor keep;
  launch_greedy_choice(logits.data<float>(), lines, n, scratch(greedy_workspace_bytes(lines, n), logits, keep),
                       ids.data<int32_t>(), logprobs.data<float>(), stream());
}

void token_logprobs(const Tensor& logits, const Tensor& targets, Tensor& out) {
  check_cuda(logits, "token_logprobs");
  launch_token_logprobs(logits.dtype(), logits.data_ptr(), logits.size(0), logits.size(1), targets.data<int32_t>(),
                        out.data<float>(), stream());
}

void topk(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices) {
  check_cuda(x, "topk");
  if (values.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(k >= 0 && k <= s.n, "[topk] expected k in [0, {}], got {}", s.n, k);
  Tensor keep;
  void* ws = scratch(topk_workspace_bytes(s.outer, s.n, s.inner, k), x, keep);
  launch_topk(xc.dtype(), xc.data_ptr(), values.data_ptr(), indices.data<int32_t>(), s.outer, s.n, s.inner, k,
              ws, stream());
}

void draw_index(const Tensor& logits, const Tensor& max_logit, float u, const Tensor* u_dev, Tensor& out) {
  check_cuda(logits, "draw_index");
  const int64_t n = logits.numel();
  Tensor keep;
  launch_draw_index(logits.data<float>(), n, max_logit.data<float>(), u, u_dev ? u_dev->data<float>() : nullptr,
                    scratch(draw_workspace_bytes(n), logits, keep), out.data<int32_t>(), stream());
}

void top_p_mask(const Tensor& logits, const Tensor& max_logit, float top_p, float min_gap, Tensor& out) {
  check_cuda(logits, "top_p_mask");
  const int64_t n = logits.numel();
  Tensor keep;
  launch_top_p_mask(logits.data<float>(), n, max_logit.data<float>(), top_p_fraction(top_p), top_p < 1.0f, min_gap,
                    scratch(top_p_workspace_bytes(n), logits, keep), out.data<float>(), stream());
}

}  // namespace tern::cuda
