// ops::norm_rope: the checks, the CPU composition (the reference) and the CUDA dispatch.
#include "tern/ops/norm_rope.h"

#include "tern/ops/index.h"
#include "tern/ops/norm.h"

namespace tern::ops {
namespace {

// q and k agree; says whether the fused CUDA kernel takes them (D <= 256 on a GPU), after the checks of
// the ops it fuses. Otherwise the CPU composition runs and those ops check for themselves.
bool fused_norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
                     const Tensor& positions, const RopeTable& table) {
  TERN_CHECK(q.defined() && k.defined(), "[norm_rope] expected defined q and k, got an undefined one");
  TERN_CHECK(q.rank() == 4 && k.rank() == 4 && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
                 q.size(3) == k.size(3) && q.dtype() == k.dtype() && q.device() == k.device(),
             "[norm_rope] expected q [B, Hq, L, D] and k [B, Hk, L, D] of one dtype and device, got {} {} and {} {}",
             shape_str(q.shape()), dtype_name(q.dtype()), shape_str(k.shape()), dtype_name(k.dtype()));
  if (q.device().is_cpu() || q.size(3) > 256) return false;
  check_rms_norm_args(q, wq, eps);
  check_rms_norm_args(k, wk, eps);
  check_rope_args(q, positions, table);
  return true;
}

}  // namespace

NormRoped norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
                    const Tensor& positions, const RopeTable& table) {
  if (!fused_norm_rope(q, k, wq, wk, eps, positions, table))
    return {rope(rms_norm(q, wq, eps), positions, table), rope(rms_norm(k, wk, eps), positions, table)};
  Tensor oq = Tensor::empty(q.shape(), q.dtype(), q.device()), ok = Tensor::empty(k.shape(), k.dtype(), k.device());
  if (oq.numel() + ok.numel() == 0) return {oq, ok};
  cuda::norm_rope(q, k, wq, wk, eps, positions, table, oq, ok);
  return {oq, ok};
}

Tensor norm_rope_write(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk, float eps,
                       const Tensor& positions, const RopeTable& table, Tensor& keys, Tensor& values, int64_t ring) {
  TERN_CHECK(v.defined(), "[norm_rope_write] expected defined v, got an undefined one");
  TERN_CHECK(!q.defined() || (q.rank() == 4 && q.size(2) == 1),
             "[norm_rope_write] expected q [B, Hq, 1, D] (one position per row), got {}", shape_str(q.shape()));
  if (!fused_norm_rope(q, k, wq, wk, eps, positions, table)) {
    NormRoped r = norm_rope(q, k, wq, wk, eps, positions, table);
    write_positions(keys, r.k, values, v, positions, ring);
    return r.q;
  }
  check_kv_writes(keys, k, values, v, positions, ring);
  Tensor oq = Tensor::empty(q.shape(), q.dtype(), q.device());
  if (oq.numel() == 0) return oq;
  cuda::norm_rope_write(q, k, v, wq, wk, eps, positions, table, oq, keys, values, ring);
  return oq;
}

Tensor norm_rope_write_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq, const Tensor& wk,
                            float eps, const Tensor& positions, const RopeTable& table, Tensor& keys, Tensor& values,
                            int64_t span, float scale, const AttentionMask& mask, float softcap) {
  TERN_CHECK(keys.defined() && values.defined() && keys.rank() == 4 && values.rank() == 4 && span >= 0 &&
                 span <= keys.size(2) && span <= values.size(2),
             "[norm_rope_write_sdpa] expected a span within the keys and values, got {} of {} and {}", span,
             shape_str(keys.shape()), shape_str(values.shape()));
  Tensor rq = norm_rope_write(q, k, v, wq, wk, eps, positions, table, keys, values);
  return sdpa(rq, keys.slice(2, 0, span), values.slice(2, 0, span), scale, mask, softcap);
}

}  // namespace tern::ops
