// CUDA reduction entry points: x made contiguous and seen as [outer, n, inner] around dim.
#include "tern/ops/reduce.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

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

}  // namespace

void softmax(const Tensor& x, int dim, bool log, Tensor& out) {
  check_cuda(x, "softmax");
  if (x.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  const size_t ws = s.inner == 1 ? row_workspace_bytes(s.outer, s.n) : 0;
  Tensor workspace = ws ? Tensor::empty({static_cast<int64_t>(ws)}, Dtype::u8, x.device()) : Tensor();
  launch_softmax(xc.dtype(), xc.data_ptr(), out.data_ptr(), s.outer, s.n, s.inner, log,
                 ws ? workspace.data_ptr() : nullptr, stream());
}

void reduce(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out) {
  check_cuda(x, "reduce");
  if (out.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(s.n > 0, "[reduce] expected a non-empty dim {}, got shape {}", dim, shape_str(x.shape()));
  const size_t ws = s.inner == 1 ? row_workspace_bytes(s.outer, s.n) : 0;
  Tensor workspace = ws ? Tensor::empty({static_cast<int64_t>(ws)}, Dtype::u8, x.device()) : Tensor();
  launch_reduce(xc.dtype(), static_cast<int>(op), xc.data_ptr(), out.data_ptr(), s.outer, s.n, s.inner,
                ws ? workspace.data_ptr() : nullptr, stream());
}

void argmax(const Tensor& x, int dim, Tensor& out) {
  check_cuda(x, "argmax");
  if (out.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(s.n > 0, "[argmax] expected a non-empty dim {}, got shape {}", dim, shape_str(x.shape()));
  const size_t ws = s.inner == 1 ? argmax_workspace_bytes(s.outer, s.n) : 0;
  Tensor workspace = ws ? Tensor::empty({static_cast<int64_t>(ws)}, Dtype::u8, x.device()) : Tensor();
  launch_argmax(xc.dtype(), xc.data_ptr(), out.data<int32_t>(), s.outer, s.n, s.inner,
                ws ? workspace.data_ptr() : nullptr, stream());
}

void topk(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices) {
  check_cuda(x, "topk");
  if (values.numel() == 0) return;
  Tensor xc = x.contiguous();
  Split s = split_at(xc, dim);
  TERN_CHECK(k >= 0 && k <= s.n, "[topk] expected k in [0, {}], got {}", s.n, k);
  const size_t ws = topk_workspace_bytes(s.outer, s.n, s.inner, k);
  Tensor workspace = ws ? Tensor::empty({static_cast<int64_t>(ws)}, Dtype::u8, x.device()) : Tensor();
  launch_topk(xc.dtype(), xc.data_ptr(), values.data_ptr(), indices.data<int32_t>(), s.outer, s.n, s.inner, k,
              ws ? workspace.data_ptr() : nullptr, stream());
}

void draw_index(const Tensor& logits, const Tensor& max_logit, float u, Tensor& out) {
  check_cuda(logits, "draw_index");
  const int64_t n = logits.numel();
  Tensor workspace = Tensor::empty({static_cast<int64_t>(draw_workspace_bytes(n))}, Dtype::u8, logits.device());
  launch_draw_index(logits.data<float>(), n, max_logit.data<float>(), u, workspace.data_ptr(), out.data<int32_t>(),
                    stream());
}

}  // namespace tern::cuda
