// cuda::sdpa with the compiled decode step's query/key preparation in front (attention.cpp), for
// ops::norm_rope_write_sdpa's one-launch form (norm_rope.cpp).
#pragma once
#include "tern/backend/cuda/kernels/norm_rope_args.h"
#include "tern/core/tensor.h"
#include "tern/ops/attention.h"

namespace tern::cuda {

// sdpa(q', k, v, ...) where q' is q normed and rotated as pre says, flash-decoding doing the norm, the
// rotation and pre's key/value write itself (kernels::DecodeArgs::pre; by4: norm_rope_128_kernel's row
// layout). q [B, Hq, 1, D] is the raw query, whose pointer pre.x[0] holds too. false, with nothing
// launched, where flash-decoding does not take the problem (D == Dv of 64 or 128, <= 16 query heads per
// kv head, no bias).
bool sdpa_after_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                          const ops::AttentionMask& mask, float softcap, const kernels::NormRopeArgs& pre, bool by4,
                          Tensor& out);

}  // namespace tern::cuda
