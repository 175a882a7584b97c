// CUDA gated DeltaNet entry points: no kernels yet, so each throws a clear error (the CPU path runs them).
#include "tern/ops/delta.h"

namespace tern::cuda {

void l2norm(const Tensor&, float, Tensor&) { TERN_THROW("[l2norm] not implemented on CUDA yet"); }
void causal_conv1d(const Tensor&, const Tensor&, Tensor&, Tensor&) {
  TERN_THROW("[causal_conv1d] not implemented on CUDA yet");
}
void gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                      ops::DeltaRuleAlgo, int64_t, Tensor&) {
  TERN_THROW("[gated_delta_rule] not implemented on CUDA yet");
}

}  // namespace tern::cuda
