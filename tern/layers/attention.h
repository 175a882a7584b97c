// Multi-head self-attention with GQA, optional per-head q/k RMSNorm (Qwen3) and RoPE, over a KVCache
// that owns the attention read (the layer never builds a mask).
#pragma once
#include "tern/layers/linear.h"
#include "tern/layers/rms_norm.h"
#include "tern/ops/rope.h"
#include "tern/state/cache.h"

namespace tern {

struct AttentionShape {
  int64_t hidden = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  bool bias = false;      // q/k/v/o biases (attention_bias)
  bool qk_norm = false;   // per-head RMSNorm on q and k before RoPE
  float norm_eps = 1e-6f;
};

class Attention {
 public:
  // Loads prefix.{q,k,v,o}_proj (+ q_norm/k_norm).
  static Attention load(const WeightLoader& w, const AttentionShape& shape, ops::RopeTable rope);
  // x [B, L, hidden] -> [B, L, hidden]; appends this step's keys/values to cache.
  Tensor forward(const Tensor& x, KVCache& cache) const;
  // The same over ops::pre_norm(in) (the block's residual add and input norm, fused into the q/k/v
  // product where it can be); the residual sum goes to sum.
  Tensor forward(const ops::PreNorm& in, KVCache& cache, Tensor& sum) const;

 private:
  // qkv: this step's q, k, v projections [B, L, heads * head_dim] -> the output projection.
  Tensor attend(const std::vector<Tensor>& qkv, KVCache& cache) const;

  AttentionShape shape_;
  ops::RopeTable rope_;
  StackedLinear qkv_;  // q_proj, k_proj, v_proj
  Linear o_proj_;
  RMSNorm q_norm_, k_norm_;
  float scale_ = 1.0f;
};

}  // namespace tern
