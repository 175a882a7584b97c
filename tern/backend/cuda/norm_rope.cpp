// CUDA entry point of ops::norm_rope (its checks are the op's): strides, weights and the rope table's
// device copy into the kernel's arguments.
#include "tern/ops/norm_rope.h"

#include "tern/backend/cuda/kernels/norm_rope_args.h"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

void norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
               const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor& out_k) {
  check_cuda(q, "norm_rope");
  kernels::NormRopeArgs a{};
  const Tensor x[2] = {q.stride(3) == 1 ? q : q.contiguous(), k.stride(3) == 1 ? k : k.contiguous()};
  const Tensor* w[2] = {&wq, &wk};
  Tensor wc[2];
  Tensor* out[2] = {&out_q, &out_k};
  for (int i = 0; i < 2; ++i) {
    a.x[i] = x[i].data_ptr();
    for (int d = 0; d < 3; ++d) a.st[i][d] = x[i].stride(d);
    a.heads[i] = x[i].size(1);
    if (w[i]->defined()) wc[i] = w[i]->contiguous();
    a.w[i] = wc[i].defined() ? wc[i].data_ptr() : nullptr;
    a.out[i] = out[i]->data_ptr();
  }
  TERN_CHECK(!wc[0].defined() || !wc[1].defined() || wc[0].dtype() == wc[1].dtype(),
             "[norm_rope] expected q and k norm weights of one dtype, got {} and {}", dtype_name(wc[0].dtype()),
             dtype_name(wc[1].dtype()));
  const Dtype wt = wc[0].defined() ? wc[0].dtype() : wc[1].defined() ? wc[1].dtype() : q.dtype();
  a.B = q.size(0), a.L = q.size(2), a.D = q.size(3), a.rot = table.rotary_dim;
  Tensor pos = positions.contiguous();
  a.pos = pos.data_ptr();
  a.per_batch = pos.rank() == 2;
  a.inv_freq =
      static_cast<const float*>(constant_buffer(table.inv_freq.data(), table.inv_freq.size() * sizeof(float)));
  a.attn_scale = table.attention_scale;
  a.eps = eps;
  launch_norm_rope(q.dtype(), wt, pos.dtype(), a, stream());
}

}  // namespace tern::cuda
