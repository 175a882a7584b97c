// CPU-only build: the CUDA mixture-of-experts entry point throws.
#include "tern/ops/moe.h"

namespace tern::cuda {

void moe_experts(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, ops::MoeActivation,
                 Tensor&) {
  TERN_THROW("[moe_experts] needs a CUDA build");
}
void moe_route(const Tensor&, int64_t, bool, Tensor&, Tensor&) { TERN_THROW("[moe_route] needs a CUDA build"); }
bool moe_norm_route(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&, int64_t, bool,
                    ops::MoeNormRoute&) {
  return false;
}

}  // namespace tern::cuda
