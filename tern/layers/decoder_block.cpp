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
  ops::AddNorm a = in.pending.defined() ? input_norm_.forward_add(in.stream, in.pending)
                                        : ops::AddNorm{in.stream, input_norm_.forward(in.stream)};
  ops::AddNorm h = post_attn_norm_.forward_add(a.sum, attn_.forward(a.normed, cache));
  Tensor out = std::visit([&](const auto& f) { return f.forward(h.normed); }, ffn_);
  return {h.sum, out};
}

}  // namespace tern
