// CPU mixture of experts: (token, slot) pairs bucketed by expert, one gate_up -> act -> down GEMM chain per
// expert over its gathered rows, then a weighted scatter-add into the f32 output.
#include <vector>

#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/matmul.h"
#include "tern/ops/moe.h"

namespace tern::cpu {

void moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, ops::MoeActivation act, Tensor& out) {
  const int64_t T = x.size(0), H = x.size(1), K = experts.size(1), E = gate_up.size(0), I = gate_up.size(1) / 2;
  // Bucket (token, weight) pairs by expert; a token's experts are distinct, so a bucket holds each token once.
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(E));
  std::vector<std::vector<float>> mix(static_cast<size_t>(E));
  const int32_t* chosen = experts.data<int32_t>();
  const float* wt = weights.data<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < K; ++j) {
      const int32_t e = chosen[t * K + j];
      TERN_CHECK(e >= 0 && e < E, "[moe_experts] expected expert ids in [0, {}), got {}", E, e);
      rows[e].push_back(static_cast<int32_t>(t));
      mix[e].push_back(wt[t * K + j]);
    }
  }

  float* o = out.data<float>();
  for (int64_t e = 0; e < E; ++e) {
    const auto n = static_cast<int64_t>(rows[e].size());
    if (n == 0) continue;
    Tensor gu = gate_up.select(0, e);                                               // [2*inter, hidden]
    Tensor xe = ops::embedding(x, Tensor::from_vector(rows[e], {n}), x.dtype());  // [n, hidden]
    Tensor g = ops::linear(xe, gu.slice(0, 0, I)), u = ops::linear(xe, gu.slice(0, I, 2 * I));  // [n, inter]
    Tensor h = act == ops::MoeActivation::swiglu ? ops::swiglu(g, u) : ops::geglu(g, u, true);
    Tensor ye = ops::linear(h, down.select(0, e));  // [n, hidden]
    if (ye.dtype() != Dtype::f32) ye = ops::cast(ye, Dtype::f32);
    ye = ye.contiguous();
    const float* y = ye.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      float* dst = o + static_cast<int64_t>(rows[e][i]) * H;
      const float* src = y + i * H;
      const float w = mix[e][i];
      for (int64_t c = 0; c < H; ++c) dst[c] += w * src[c];
    }
  }
}

}  // namespace tern::cpu
