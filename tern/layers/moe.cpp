// SparseMoe: routing, loading in either expert layout, and the CPU forward (per-expert gather,
// one GEMM chain per expert over its gathered rows, weighted scatter-add).
#include "tern/layers/moe.h"

#include <string>

#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/matmul.h"
#include "tern/ops/reduce.h"

namespace tern {

RouterChoice route_top_k(const Tensor& logits, int64_t k, bool renormalize) {
  TERN_CHECK(logits.defined() && logits.rank() == 2, "[moe] expected router logits [T, n_expert], got {}",
             logits.defined() ? shape_str(logits.shape()) : std::string("an undefined tensor"));
  TERN_CHECK(k >= 1 && k <= logits.size(1), "[moe] expected top-k in [1, {}], got {}", logits.size(1), k);
  Tensor lf = logits.dtype() == Dtype::f32 ? logits : ops::cast(logits, Dtype::f32);
  ops::TopK top = ops::topk(ops::softmax(lf, -1), k, -1);
  Tensor w = top.values;
  if (renormalize) w = ops::div(w, ops::sum(w, -1, true));
  return RouterChoice{w.contiguous(), top.indices.contiguous()};
}

SparseMoe SparseMoe::load(const WeightLoader& w, const SparseMoeShape& shape) {
  const int64_t E = shape.n_expert, H = shape.hidden, I = shape.expert_inter;
  TERN_CHECK(E >= 1 && shape.n_expert_used >= 1 && shape.n_expert_used <= E,
             "[moe] expected 1 <= num_experts_per_tok <= num_experts, got {} of {}", shape.n_expert_used, E);
  TERN_CHECK(H >= 1 && I >= 1, "[moe] expected positive hidden and moe_intermediate_size, got {} and {}", H, I);
  SparseMoe m;
  m.shape_ = shape;
  m.router_ = Linear::load(w, "gate", H, E, false);
  m.experts_.reserve(E);
  if (w.has("experts.gate_up_proj")) {
    // Fused layout: views into the stacked tensors; gate is the first half of gate_up, as in chunk(2).
    Tensor gate_up = w.get_matrix("experts.gate_up_proj", {E, 2 * I, H});
    Tensor down = w.get_matrix("experts.down_proj", {E, H, I});
    for (int64_t e = 0; e < E; ++e) {
      Tensor gu = gate_up.select(0, e);
      m.experts_.push_back(ExpertWeights{gu.slice(0, 0, I), gu.slice(0, I, 2 * I), down.select(0, e)});
    }
  } else {
    for (int64_t e = 0; e < E; ++e) {
      WeightLoader x = w.sub("experts." + std::to_string(e) + ".");
      m.experts_.push_back(ExpertWeights{x.get_matrix("gate_proj.weight", {I, H}), x.get_matrix("up_proj.weight", {I, H}),
                                  x.get_matrix("down_proj.weight", {H, I})});
    }
  }
  return m;
}

Tensor mix_experts(const Tensor& x, const RouterChoice& route, const std::vector<ExpertWeights>& experts,
                   ExpertActivation act) {
  const int64_t T = x.size(0), H = x.size(1), K = route.experts.size(1);
  const auto E = static_cast<int64_t>(experts.size());
  // Bucket (token, weight) pairs by expert; top-k picks distinct experts, so a bucket holds each token once.
  std::vector<std::vector<int32_t>> rows(E);
  std::vector<std::vector<float>> weights(E);
  const int32_t* chosen = route.experts.data<int32_t>();
  const float* mix = route.weights.data<float>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < K; ++j) {
      const int32_t e = chosen[t * K + j];
      TERN_ASSERT(e >= 0 && e < E, "[moe] router chose expert {} of {}", e, E);
      rows[e].push_back(static_cast<int32_t>(t));
      weights[e].push_back(mix[t * K + j]);
    }
  }

  Tensor out = Tensor::zeros({T, H}, Dtype::f32);  // [T, hidden]
  float* o = out.data<float>();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = static_cast<int64_t>(rows[e].size());
    if (n == 0) continue;
    const ExpertWeights& ex = experts[e];
    Tensor xe = ops::embedding(x, Tensor::from_vector(rows[e], {n}), x.dtype());  // [n, hidden]
    Tensor g = ops::linear(xe, ex.gate), u = ops::linear(xe, ex.up);               // [n, inter]
    Tensor h = act == ExpertActivation::swiglu ? ops::swiglu(g, u) : ops::geglu(g, u, true);
    Tensor ye = ops::linear(h, ex.down);  // [n, hidden]
    if (ye.dtype() != Dtype::f32) ye = ops::cast(ye, Dtype::f32);
    ye = ye.contiguous();
    const float* y = ye.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      float* dst = o + static_cast<int64_t>(rows[e][i]) * H;
      const float* src = y + i * H;
      const float wt = weights[e][i];
      for (int64_t c = 0; c < H; ++c) dst[c] += wt * src[c];
    }
  }
  return out;
}

Tensor SparseMoe::forward(const Tensor& x) const {
  const int64_t H = shape_.hidden, K = shape_.n_expert_used;
  TERN_CHECK(x.defined() && x.rank() >= 1 && x.size(-1) == H, "[moe] expected x [..., {}], got {}", H,
             x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  TERN_CHECK(x.device().is_cpu(), "[moe] expected a cpu tensor (the grouped CUDA path is not built), got {}",
             x.device().str());
  const int64_t T = x.numel() / H;
  Tensor x2 = x.reshape({T, H}).contiguous();  // [T, hidden]
  RouterChoice route = route_top_k(router_.forward(x2), K, shape_.norm_topk_prob);

  Tensor out = mix_experts(x2, route, experts_, ExpertActivation::swiglu);  // [T, hidden] f32
  if (x.dtype() != Dtype::f32) out = ops::cast(out, x.dtype());
  return out.view(x.shape());
}

}  // namespace tern
