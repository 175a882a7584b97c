// The sampler's row draw (ops::draw_index) on the CPU: tern/base/draw_weight.h's draw_row_index, the
// host sampler's own. Built with the sampler's flags (-ffp-contract=off -fno-trapping-math; CMakeLists.txt).
#include "tern/base/draw_weight.h"
#include "tern/ops/reduce.h"

namespace tern::cpu {

void draw_index(const Tensor& logits, float max_logit, float u, Tensor& out) {
  out.data<int32_t>()[0] = static_cast<int32_t>(draw_row_index(logits.data<float>(), logits.numel(), max_logit, u));
}

}  // namespace tern::cpu
