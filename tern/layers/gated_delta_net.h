// GatedDeltaNet: the linear-attention token mixer of Qwen3.5 — q/k/v, z, b, a projections, a depthwise
// causal conv1d + SiLU over q/k/v, L2-normalised q and k, the gated delta rule over a RecurrentCache,
// the gated RMSNorm rmsnorm(o) * silu(z), and the output projection.
#pragma once
#include <memory>

#include "tern/layers/linear.h"
#include "tern/layers/rms_norm.h"
#include "tern/state/recurrent_cache.h"

namespace tern {

struct GatedDeltaNetShape {
  int64_t hidden = 0;
  int64_t n_k_head = 0, n_v_head = 0;  // linear_num_key_heads, linear_num_value_heads
  int64_t d_k = 0, d_v = 0;            // linear_key_head_dim, linear_value_head_dim
  int64_t conv_kernel = 4;             // linear_conv_kernel_dim
  float norm_eps = 1e-6f;
};

class GatedDeltaNet {
 public:
  // Loads prefix.{in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj}.weight, conv1d.weight
  // [conv_dim, 1, K], dt_bias and A_log [n_v_head], norm.weight [d_v]. Throws "[gated-deltanet] expected ..."
  // when n_v_head is not a multiple of n_k_head, and the loader's errors for missing or misshapen tensors.
  static GatedDeltaNet load(const WeightLoader& w, const GatedDeltaNetShape& shape);
  // x [B, L, hidden] -> [B, L, hidden]; continues from and updates cache. Prefill (or any L > 1, or the first
  // append) runs the chunked rule, a one-token step on a warm cache the recurrent one, as transformers does.
  Tensor forward(const Tensor& x, RecurrentCache& cache) const;
  // A fresh cache of this layer's shape.
  std::unique_ptr<RecurrentCache> make_cache() const;
  // The state that cache holds for a layer of this shape.
  static RecurrentShape cache_shape(const GatedDeltaNetShape& s);

  const GatedDeltaNetShape& shape() const { return shape_; }

 private:
  GatedDeltaNetShape shape_;
  Linear in_qkv_, in_z_, in_b_, in_a_, out_;
  Tensor conv_w_;    // [conv_dim, K] f32
  Tensor dt_bias_;   // [n_v_head] f32
  Tensor neg_a_;     // -exp(A_log) [n_v_head] f32
  RMSNorm norm_;     // over d_v, weight as stored (not zero-centred)
};

}  // namespace tern
