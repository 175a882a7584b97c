// The pre-norm decoder block of Llama-family models: x + attn(norm(x)), then h + ffn(norm(h)), where the
// feed-forward is a dense gated MLP or a sparse mixture of experts.
#pragma once
#include <variant>

#include "tern/layers/attention.h"
#include "tern/layers/mlp.h"
#include "tern/layers/moe.h"
#include "tern/layers/rms_norm.h"

namespace tern {

// The feed-forward half of a block.
using FeedForward = std::variant<GatedMlp, SparseMoe>;

class DecoderBlock {
 public:
  // Loads prefix.{input_layernorm, self_attn.*, post_attention_layernorm, mlp.*}.
  static DecoderBlock load(const WeightLoader& w, const AttentionShape& attn, ops::RopeTable rope, int64_t inter,
                           GatedMlp::Act act, bool mlp_bias);
  // Loads the norms and attention from prefix and takes the feed-forward already loaded (from prefix.mlp.*).
  static DecoderBlock load(const WeightLoader& w, const AttentionShape& attn, ops::RopeTable rope, FeedForward ffn);
  // The residual stream with the last block output not yet added: the next block (or the final norm)
  // adds it in its fused add+norm, which saves two passes over the activations per block.
  struct Residual {
    Tensor stream;   // [B, L, hidden]
    Tensor pending;  // [B, L, hidden] or undefined (nothing to add)
  };
  // in -> {stream + attention, feed-forward output}: the block's output is their sum.
  Residual forward(const Residual& in, KVCache& cache) const;

 private:
  RMSNorm input_norm_, post_attn_norm_;
  Attention attn_;
  FeedForward ffn_;
};

}  // namespace tern
