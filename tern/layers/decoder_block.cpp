// DecoderBlock.
#include "tern/layers/decoder_block.h"

namespace tern {

DecoderBlock DecoderBlock::load(const WeightLoader& w, const AttentionShape& attn, ops::RopeTable rope, int64_t inter,
                                GatedMlp::Act act, bool mlp_bias) {
  return load(w, attn, std::move(rope), GatedMlp::load(w.sub("mlp."), attn.hidden, inter, act, mlp_bias));
}

DecoderBlock DecoderBlock::load(const WeightLoader& w, const AttentionShape& attn, ops::RopeTable rope,
                                FeedForward ffn) {
  DecoderBlock b;
  b.input_norm_ = RMSNorm::load(w, "input_layernorm", attn.hidden, attn.norm_eps);
  b.post_attn_norm_ = RMSNorm::load(w, "post_attention_layernorm", attn.hidden, attn.norm_eps);
  b.attn_ = Attention::load(w.sub("self_attn."), attn, std::move(rope));
  b.ffn_ = std::move(ffn);
  return b;
}

DecoderBlock::Residual DecoderBlock::forward(const Residual& in, KVCache& cache) const {
  Tensor a, h;
  Tensor attn = attn_.forward(ops::PreNorm{in.stream, in.pending, input_norm_.weight, input_norm_.eps}, cache, a);
  const ops::PreNorm mlp_in{a, attn, post_attn_norm_.weight, post_attn_norm_.eps};
  Tensor out = std::visit([&](const auto& f) { return f.forward(mlp_in, h); }, ffn_);
  return {h, out};
}

}  // namespace tern
