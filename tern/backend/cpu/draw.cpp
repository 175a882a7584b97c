// The sampler's row draw (ops::draw_index) on the CPU: tern/base/draw_weight.h's rule in one pass for
// the total and one for the walk. Built with -ffp-contract=off, as the sampler is (CMakeLists.txt).
#include "tern/base/draw_weight.h"
#include "tern/base/error.h"
#include "tern/ops/reduce.h"

namespace tern::cpu {

void draw_index(const Tensor& logits, float max_logit, float u, Tensor& out) {
  const float* l = logits.data<float>();
  const int64_t n = logits.numel();
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += draw_weight(l[i], max_logit);
  const uint64_t target = draw_target(u, total);
  uint64_t cum = 0;
  int64_t id = 0;
  for (; id < n; ++id) {
    cum += draw_weight(l[id], max_logit);
    if (target < cum) break;
  }
  // A row whose max is not max_logit can leave the target at or past the total: the last id then.
  out.data<int32_t>()[0] = static_cast<int32_t>(id < n ? id : n - 1);
}

}  // namespace tern::cpu
