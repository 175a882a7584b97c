// DecoderBlock.
#include "tern/layers/decoder_block.h"

#include "tern/ops/elementwise.h"

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

Tensor DecoderBlock::forward(const Tensor& x, KVCache& cache) const {
  Tensor h = attn_.forward(input_norm_.forward(x), cache);
  ops::binary_(h, x, ops::BinaryOp::add);
  Tensor normed = post_attn_norm_.forward(h);
  Tensor out = std::visit([&](const auto& f) { return f.forward(normed); }, ffn_);
  ops::binary_(out, h, ops::BinaryOp::add);
  return out;
}

}  // namespace tern
