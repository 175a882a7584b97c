// CPU-only build: the CUDA side of ops::norm_rope and ops::norm_rope_write.
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
}  // namespace tern::cuda
