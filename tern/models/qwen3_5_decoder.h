// Qwen35Decoder: the shared body of Qwen3.5 and Qwen3.5-MoE text models — embeddings, N pre-norm blocks
// whose token mixer is a gated DeltaNet (linear_attention) or gated full attention (full_attention) per
// layer_types, a dense or shared-expert MoE feed-forward, zero-centred RMSNorms, final norm, head.
// qwen3_5.cpp and qwen3_5_moe.cpp configure it.
#pragma once
#include <functional>
#include <optional>
#include <variant>

#include "tern/layers/gated_attention.h"
#include "tern/layers/gated_delta_net.h"
#include "tern/layers/mlp.h"
#include "tern/layers/shared_expert_moe.h"
#include "tern/models/model.h"

namespace tern {

using Qwen35FeedForward = std::variant<GatedMlp, SharedExpertMoe>;

struct Qwen35Spec {
  // Builds layer i's feed-forward from its "mlp." loader.
  std::function<Qwen35FeedForward(const WeightLoader& mlp, int64_t layer)> make_ffn;
};

class Qwen35Decoder : public Model {
 public:
  // Throws "[config] ..." for a layer_types entry other than linear_attention / full_attention or a
  // missing linear_* key, and the loaders' errors for missing or misshapen tensors. Tensors outside the
  // text model (vision tower, MTP head) are skipped, and one info line says which.
  Qwen35Decoder(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options,
                const Qwen35Spec& spec);

  // A RecurrentCache per linear_attention layer, a make_kv_cache cache per full_attention layer
  // (attention_index counts full-attention layers only).
  CacheList make_caches(const KVCacheOptions& kv = {}) const override;
  // linear_attention layers: recurrent (the conv history and the delta-rule state, f32); full_attention
  // layers: full.
  std::vector<LayerCacheSpec> cache_layout() const override;
  Tensor forward(const Tensor& ids, CacheList& caches, bool all_logits) const override;
  Tensor forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const override;
  bool can_capture_decode() const override;

 private:
  struct Block {
    RMSNorm input_norm, post_attn_norm;
    std::variant<GatedDeltaNet, GatedAttention> mixer;
    Qwen35FeedForward ffn;
  };
  Embedding embed_;
  std::vector<Block> blocks_;
  RMSNorm final_norm_;
  Tensor lm_head_;  // [vocab, hidden]; the embedding table when tied
  int64_t n_full_ = 0;
};

// The integer config key `name` of the text config; fallback when absent (none: throws "[config] ...").
int64_t qwen35_int_key(const io::ModelConfig& c, const char* name, std::optional<int64_t> fallback = std::nullopt);
// The gated DeltaNet layers' shape from the linear_* keys (zeros when no layer is linear_attention).
GatedDeltaNetShape qwen35_linear_shape(const io::ModelConfig& c);
// What each layer's cache holds, from layer_types (Qwen35Decoder::cache_layout).
std::vector<LayerCacheSpec> qwen35_cache_layout(const io::ModelConfig& c);

}  // namespace tern
