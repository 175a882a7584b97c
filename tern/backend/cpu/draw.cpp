// The sampler's row draw (ops::draw_index) and nucleus (ops::top_p_mask) on the CPU, by the integer
// rules of tern/base/draw_weight.h (draw_row_index is the host sampler's own draw). Built with the
// sampler's flags (-ffp-contract=off -fno-trapping-math; CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tern/base/draw_weight.h"
#include "tern/ops/reduce.h"

namespace tern::cpu {

void draw_index(const Tensor& logits, float max_logit, float u, Tensor& out) {
  out.data<int32_t>()[0] = static_cast<int32_t>(draw_row_index(logits.data<float>(), logits.numel(), max_logit, u));
}

// The reference: every id above -inf sorted best first (higher logit, then lower id), walked.
void top_p_mask(const Tensor& logits, float max_logit, float top_p, float min_gap, Tensor& out) {
  const float* x = logits.data<float>();
  float* y = out.data<float>();
  const int64_t n = logits.numel();
  if (!std::isfinite(max_logit)) {
    std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  std::vector<char> keep(static_cast<size_t>(n), 1);
  if (top_p < 1.0f) {
    std::vector<int32_t> order;
    std::vector<uint64_t> w(static_cast<size_t>(n), 0);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i]) || x[i] == -INFINITY) continue;  // NaN: outside the contract, kept out of the sort
      w[i] = draw_weight_of(exp_f32(x[i] - max_logit));
      total += w[i];
      order.push_back(static_cast<int32_t>(i));
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    const uint64_t target = top_p_target(top_p_fraction(top_p), total);
    std::fill(keep.begin(), keep.end(), 0);
    uint64_t before = 0;
    for (size_t j = 0; j < order.size(); ++j) {
      if (j > 0 && before >= target) break;
      keep[order[j]] = 1;
      before += w[order[j]];
    }
  }
  for (int64_t i = 0; i < n; ++i) y[i] = keep[i] && !(x[i] - max_logit < min_gap) ? x[i] : -INFINITY;
}

}  // namespace tern::cpu
