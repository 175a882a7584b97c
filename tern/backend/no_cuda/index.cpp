// CPU-only build: the CUDA indexing entry points throw.
#include "tern/ops/index.h"

namespace tern::cuda {

void embedding(const Tensor&, const Tensor&, Tensor&) { TERN_THROW("[embedding] needs a CUDA build"); }
void write_positions(Tensor&, const Tensor&, const Tensor&) { TERN_THROW("[write_positions] needs a CUDA build"); }
void write_positions(Tensor&, const Tensor&, Tensor&, const Tensor&, const Tensor&, int64_t) {
  TERN_THROW("[write_positions] needs a CUDA build");
}
void scatter_rows(Tensor&, const Tensor&, const Tensor&) { TERN_THROW("[scatter_rows] needs a CUDA build"); }

}  // namespace tern::cuda
