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

// The launch of q's and k's rows, and of v's when the keys and values go to a cache (kv non-null).
// Holds the contiguous copies the arguments point at until the launch is queued.
void run(const Tensor& q, const Tensor& k, const Tensor* v, const Tensor& wq, const Tensor& wk, float eps,
         const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor* out_k, Tensor* kv[2],
         int64_t ring) {
  kernels::NormRopeArgs a{};
  auto last_contiguous = [](const Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); };
  const Tensor x[3] = {last_contiguous(q), last_contiguous(k), v ? last_contiguous(*v) : Tensor()};
  for (int i = 0; i < 3; ++i) {
    if (!x[i].defined()) continue;
    a.x[i] = x[i].data_ptr();
    for (int d = 0; d < 3; ++d) a.st[i][d] = x[i].stride(d);
  }
  const Tensor* w[2] = {&wq, &wk};
  Tensor wc[2];
  for (int i = 0; i < 2; ++i) {
    a.heads[i] = x[i].size(1);
    if (w[i]->defined()) wc[i] = w[i]->contiguous();
    a.w[i] = wc[i].defined() ? wc[i].data_ptr() : nullptr;
  }
  a.out[0] = out_q.data_ptr();
  a.out[1] = out_k ? out_k->data_ptr() : nullptr;
  TERN_CHECK(!wc[0].defined() || !wc[1].defined() || wc[0].dtype() == wc[1].dtype(),
             "[norm_rope] expected q and k norm weights of one dtype, got {} and {}", dtype_name(wc[0].dtype()),
             dtype_name(wc[1].dtype()));
  const Dtype wt = wc[0].defined() ? wc[0].dtype() : wc[1].defined() ? wc[1].dtype() : q.dtype();
  a.B = q.size(0), a.L = q.size(2), a.D = q.size(3), a.rot = table.rotary_dim;
  if (kv) {
    a.Dv = v->size(3), a.kv_n = kv[0]->size(2), a.ring = ring;
    for (int i = 0; i < 2; ++i) {
      a.kv[i] = kv[i]->data_ptr();
      for (int d = 0; d < 3; ++d) a.kv_st[i][d] = kv[i]->stride(d);
    }
  }
  Tensor pos = positions.contiguous();
  a.pos = pos.data_ptr();
  a.per_batch = pos.rank() == 2;
  a.inv_freq =
      static_cast<const float*>(constant_buffer(table.inv_freq.data(), table.inv_freq.size() * sizeof(float)));
  a.attn_scale = table.attention_scale;
  a.eps = eps;
  launch_norm_rope(q.dtype(), wt, pos.dtype(), a, stream());
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
