// CPU-only build: the CUDA gated DeltaNet entry points throw.
#include "tern/ops/delta.h"

namespace tern::cuda {

void l2norm(const Tensor&, float, Tensor&) { TERN_THROW("[l2norm] needs a CUDA build"); }
void causal_conv1d(const Tensor&, const Tensor&, Tensor&, Tensor&) { TERN_THROW("[causal_conv1d] needs a CUDA build"); }
void gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                      ops::DeltaRuleAlgo, int64_t, Tensor&) {
  TERN_THROW("[gated_delta_rule] needs a CUDA build");
}

}  // namespace tern::cuda
