// The query/key preparation of attention layers with per-head q/k norms, in one pass: RMSNorm of each
// head row, then the rotary embedding at the cache's positions.
#pragma once
#include "tern/core/tensor.h"
#include "tern/ops/rope.h"

namespace tern::ops {

// q [B, Hq, L, D] and k [B, Hk, L, D] (any strides, last dim contiguous), weights wq and wk [D] (or
// undefined for the scale-free norm), positions as ops::rope takes them. Returns contiguous
// {rope(rms_norm(q, wq, eps)), rope(rms_norm(k, wk, eps))}: the same numbers as the two ops one after
// the other (the normed rows rounded to q's dtype before the rotation), in one kernel launch on CUDA.
struct NormRoped {
  Tensor q, k;
};
NormRoped norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
                    const Tensor& positions, const RopeTable& table);

}  // namespace tern::ops

namespace tern::cuda {
void norm_rope(const Tensor& q, const Tensor& k, const Tensor& wq, const Tensor& wk, float eps,
               const Tensor& positions, const ops::RopeTable& table, Tensor& out_q, Tensor& out_k);
}
