// CPU-only builds: CUDA attention throws.
#include "tern/ops/attention.h"

namespace tern::cuda {

void sdpa(const Tensor&, const Tensor&, const Tensor&, float, const ops::AttentionMask&, float, Tensor&) {
  throw Error("[sdpa] needs a CUDA build");
}

void sdpa_partial(const Tensor&, const Tensor&, const Tensor&, float, const ops::AttentionMask&, float, float*) {
  throw Error("[sdpa] needs a CUDA build");
}

bool sdpa_takes_wide_heads(const Tensor&, const Tensor&, const Tensor&, const ops::AttentionMask&) { return false; }

}  // namespace tern::cuda
