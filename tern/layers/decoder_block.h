// The pre-norm decoder block of Llama-family models: x + attn(norm(x)), then h + mlp(norm(h)).
#pragma once
#include "tern/layers/attention.h"
#include "tern/layers/mlp.h"
#include "tern/layers/rms_norm.h"

namespace tern {

class DecoderBlock {
 public:
  // Loads prefix.{input_layernorm, self_attn.*, post_attention_layernorm, mlp.*}.
  static DecoderBlock load(const WeightLoader& w, const AttentionShape& attn, ops::RopeTable rope, int64_t inter,
                           GatedMlp::Act act, bool mlp_bias);
  // x [B, L, hidden] -> [B, L, hidden]
  Tensor forward(const Tensor& x, KVCache& cache) const;

 private:
  RMSNorm input_norm_, post_attn_norm_;
  Attention attn_;
  GatedMlp mlp_;
};

}  // namespace tern
