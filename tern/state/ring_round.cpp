// RingRoundCopies: the parts that need no caller's layout.
#include "tern/state/ring_round.h"

#include "tern/base/error.h"
#include "tern/ops/index.h"

namespace tern {

Tensor RingRoundCopies::concat(const Tensor& a, const Tensor& b, int dim) { return ops::concat({a, b}, dim); }

void RingRoundCopies::check_rollback(int64_t drafted, int64_t keep, int64_t window) {
  TERN_CHECK(keep == drafted || drafted <= window,
             "[kv-cache] expected a speculative round of at most the ring's window ({}) to roll back, got {} drafted "
             "positions (keep all of them or none of the round can be restored)",
             window, drafted);
}

}  // namespace tern
