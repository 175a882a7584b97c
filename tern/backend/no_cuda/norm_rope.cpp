// CPU-only build: the CUDA side of ops::norm_rope, ops::norm_rope_write and ops::norm_rope_write_sdpa.
#include "tern/ops/norm_rope.h"

namespace tern::cuda {
void norm_rope(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const Tensor&, const ops::RopeTable&,
               Tensor&, Tensor&) {
  TERN_THROW("[norm_rope] needs a CUDA build");
}
void norm_rope_write(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, const Tensor&,
                     const ops::RopeTable&, Tensor&, Tensor&, Tensor&, int64_t) {
  TERN_THROW("[norm_rope_write] needs a CUDA build");
}
Tensor norm_rope_write_sdpa(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float,
                            const Tensor&, const ops::RopeTable&, Tensor&, Tensor&, int64_t, float,
                            const ops::AttentionMask&, float) {
  TERN_THROW("[norm_rope_write_sdpa] needs a CUDA build");
}
}  // namespace tern::cuda
