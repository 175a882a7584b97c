// CUDA entry points of ops::norm_rope and ops::norm_rope_write (their checks are the ops'): strides,
// weights, the cache destination and the rope table's device copy into the kernel's arguments.
#include "tern/ops/norm_rope.h"

#include <cstdlib>
#include <cstring>

#include "tern/backend/cuda/kernels/norm_rope_args.h"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/index.h"

namespace tern::cuda {
namespace {

// The kernel arguments of q's and k's rows, and of v's when the keys and values go to a cache (kv
// non-null), with the contiguous copies they point at (held until the launch is queued).
struct Prepared {
  kernels::NormRopeArgs a{};
  Tensor x[3], wc[2], pos;
  Dtype wt = Dtype::f32;
};
Prepared prepare(const Tensor& q, const Tensor& k, const Tensor* v, const Tensor& wq, const Tensor& wk, float eps,
                 const Tensor& positions, const ops::RopeTable& table, Tensor* out_q, Tensor* out_k, Tensor* kv[2],
                 int64_t ring) {
  Prepared r;
  kernels::NormRopeArgs& a = r.a;
  auto last_contiguous = [](const Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); };
  r.x[0] = last_contiguous(q), r.x[1] = last_contiguous(k), r.x[2] = v ? last_contiguous(*v) : Tensor();
  for (int i = 0; i < 3; ++i) {
    if (!r.x[i].defined()) continue;
    a.x[i] = r.x[i].data_ptr();
    for (int d = 0; d < 3; ++d) a.st[i][d] = r.x[i].stride(d);
  }
  const Tensor* w[2] = {&wq, &wk};
  for (int i = 0; i < 2; ++i) {
    a.heads[i] = r.x[i].size(1);
    if (w[i]->defined()) r.wc[i] = w[i]->contiguous();
    a.w[i] = r.wc[i].defined() ? r.wc[i].data_ptr() : nullptr;
  }
  a.out[0] = out_q ? out_q->data_ptr() : nullptr;
  a.out[1] = out_k ? out_k->data_ptr() : nullptr;
  TERN_CHECK(!r.wc[0].defined() || !r.wc[1].defined() || r.wc[0].dtype() == r.wc[1].dtype(),
             "[norm_rope] expected q and k norm weights of one dtype, got {} and {}", dtype_name(r.wc[0].dtype()),
             dtype_name(r.wc[1].dtype()));
  r.wt = r.wc[0].defined() ? r.wc[0].dtype() : r.wc[1].defined() ? r.wc[1].dtype() : q.dtype();
  a.B = q.size(0), a.L = q.size(2), a.D = q.size(3), a.rot = table.rotary_dim;
  if (kv) {
    a.Dv = v->size(3), a.kv_n = kv[0]->size(2), a.ring = ring;
    for (int i = 0; i < 2; ++i) {
      a.kv[i] = kv[i]->data_ptr();
      for (int d = 0; d < 3; ++d) a.kv_st[i][d] = kv[i]->stride(d);
    }
  }
  r.pos = positions.contiguous();
  a.pos = r.pos.data_ptr();
  a.per_batch = r.pos.rank() == 2;
  a.inv_freq =
      static_cast<const float*>(constant_buffer(table.inv_freq.data(), table.inv_freq.size() * sizeof(float)));
  a.attn_scale = table.attention_scale;
  a.eps = eps;
  return r;
}

void run(const Tensor& q, const Tensor& k, const Tensor* v, const Tensor& wq, const Tensor& wk, float eps,
         const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor* out_k, Tensor* kv[2],
         int64_t ring) {
  const Prepared r = prepare(q, k, v, wq, wk, eps, positions, table, &out_q, out_k, kv, ring);
  launch_norm_rope(q.dtype(), r.wt, r.pos.dtype(), r.a, stream());
}

}  // namespace

void norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps, const Tensor& positions,
               const ops::RopeTable& table, Tensor& out_q, Tensor& out_k) {
  check_cuda(q, "norm_rope");
  run(q, k, nullptr, wq, wk, eps, positions, table, out_q, &out_k, nullptr, 0);
}

void norm_rope_write(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk, float eps,
                     const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor& keys, Tensor& values,
                     int64_t ring) {
  check_cuda(q, "norm_rope_write");
  // TERN_CUDA_FUSED_KV_WRITE=0: the norm_rope launch, then the write_positions one (for benchmarks; read once)
  static const bool fused = [] {
    const char* e = std::getenv("TERN_CUDA_FUSED_KV_WRITE");
    return !e || std::strcmp(e, "0") != 0;
  }();
  if (!fused) {
    Tensor ok = Tensor::empty(k.shape(), k.dtype(), k.device());
    run(q, k, nullptr, wq, wk, eps, positions, table, out_q, &ok, nullptr, 0);
    write_positions(keys, ok, values, v, positions.contiguous(), ring);
    return;
  }
  Tensor* kv[2] = {&keys, &values};
  run(q, k, &v, wq, wk, eps, positions, table, out_q, nullptr, kv, ring);
}

}  // namespace tern::cuda
