// Qwen3-MoE (Qwen3MoeForCausalLM): the Qwen3 body (q/k RMSNorm, GQA, RoPE) whose feed-forward is a
// top-k routed mixture of SwiGLU experts, except on mlp_only_layers and off the decoder_sparse_step grid.
#include <algorithm>
#include <initializer_list>
#include <optional>

#include "tern/models/architectures.h"
#include "tern/models/dense_decoder.h"

namespace tern {
namespace {

int64_t int_key(const io::ModelConfig& c, std::initializer_list<const char*> names, std::optional<int64_t> fallback) {
  for (const char* n : names) {
    auto it = c.text.find(n);
    if (it == c.text.end() || it->is_null()) continue;
    TERN_CHECK(it->is_number_integer(), "[config] {}: expected {} to be an integer, got {}", c.path, n, it->dump());
    return it->get<int64_t>();
  }
  TERN_CHECK(fallback.has_value(), "[config] {}: expected key {} for qwen3_moe, got none", c.path, *names.begin());
  return *fallback;
}

// The experts and the layers that have them: all but mlp_only_layers, on the decoder_sparse_step grid.
struct Qwen3MoeLayers {
  SparseMoeShape moe;
  int64_t sparse_step = 1;
  std::vector<int64_t> mlp_only;
  bool sparse(int64_t layer) const {
    return std::find(mlp_only.begin(), mlp_only.end(), layer) == mlp_only.end() && moe.n_expert > 0 &&
           (layer + 1) % sparse_step == 0;
  }
};

Qwen3MoeLayers parse_layers(const io::ModelConfig& config) {
  const auto& t = config.text;
  Qwen3MoeLayers l;
  l.moe.hidden = config.hidden_size;
  // transformers v4 writes num_experts; v5 may write num_local_experts.
  l.moe.n_expert = int_key(config, {"num_experts", "num_local_experts"}, std::nullopt);
  l.moe.n_expert_used = int_key(config, {"num_experts_per_tok"}, std::nullopt);
  l.moe.expert_inter = int_key(config, {"moe_intermediate_size"}, std::nullopt);
  l.moe.norm_topk_prob = t.contains("norm_topk_prob") && t["norm_topk_prob"].is_boolean() && t["norm_topk_prob"].get<bool>();
  l.sparse_step = int_key(config, {"decoder_sparse_step"}, 1);
  TERN_CHECK(l.sparse_step >= 1, "[config] {}: expected decoder_sparse_step >= 1, got {}", config.path, l.sparse_step);
  if (t.contains("mlp_only_layers") && !t["mlp_only_layers"].is_null()) {
    TERN_CHECK(t["mlp_only_layers"].is_array(), "[config] {}: expected mlp_only_layers to be a list, got {}",
               config.path, t["mlp_only_layers"].dump());
    l.mlp_only = t["mlp_only_layers"].get<std::vector<int64_t>>();
  }
  return l;
}

}  // namespace

ModelShape shape_qwen3_moe(const io::ModelConfig& config) {
  const Qwen3MoeLayers l = parse_layers(config);
  int64_t sparse = 0;
  for (int64_t i = 0; i < config.n_layer; ++i) sparse += l.sparse(i);
  if (sparse == 0) return {default_cache_layout(config), {}};
  return {default_cache_layout(config), {sparse, l.moe.n_expert, l.moe.n_expert_used, l.moe.expert_params()}};
}

std::unique_ptr<Model> load_qwen3_moe(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
  const Qwen3MoeLayers layers = parse_layers(config);
  const GatedMlp::Act act = mlp_act_from_name(config.hidden_act);
  TERN_CHECK(act == GatedMlp::Act::silu, "[config] {}: expected hidden_act silu for qwen3_moe, got '{}'", config.path,
             config.hidden_act);

  DenseDecoderSpec spec{.qk_norm = true, .make_ffn = {}};
  spec.make_ffn = [=](const WeightLoader& w, int64_t layer) -> FeedForward {
    if (layers.sparse(layer)) return SparseMoe::load(w, layers.moe);
    TERN_CHECK(config.intermediate_size > 0, "[config] {}: expected intermediate_size for dense layer {}, got {}",
               config.path, layer, config.intermediate_size);
    return GatedMlp::load(w, config.hidden_size, config.intermediate_size, act, config.mlp_bias);
  };
  return std::make_unique<DenseDecoder>(dir, config, options, spec);
}

}  // namespace tern
