// Prompt prefill in bounded forwards.
#include "tern/engine/prefill.h"

#include <algorithm>

#include "tern/base/error.h"

namespace tern {

int64_t prefill_positions(int64_t rows, int64_t positions, int64_t max_tokens) {
  TERN_CHECK(rows >= 1 && positions >= 1, "[prefill] expected at least one row and one position, got {} x {}", rows,
             positions);
  if (max_tokens <= 0) return positions;
  return std::clamp<int64_t>(max_tokens / rows, 1, positions);
}

Tensor prefill(const Model& model, const Tensor& ids, CacheList& caches, int64_t max_tokens) {
  TERN_CHECK(ids.rank() == 2 && ids.dtype() == Dtype::i32, "[prefill] expected ids [B, P] i32, got {} {}",
             shape_str(ids.shape()), dtype_name(ids.dtype()));
  const int64_t B = ids.size(0), P = ids.size(1);
  const int64_t chunk = prefill_positions(B, P, max_tokens);
  if (chunk == P) return model.forward(ids, caches, false);
  Tensor logits;
  for (int64_t s = 0; s < P; s += chunk)
    logits = model.forward(ids.narrow(1, s, std::min(chunk, P - s)).contiguous(), caches, false);
  return logits;
}

}  // namespace tern
