// Qwen3.5-MoE (text model): the Qwen3.5 hybrid whose every feed-forward is a top-k routed mixture of
// SwiGLU experts (weights renormalised) plus a sigmoid-gated shared expert.
#include "tern/models/architectures.h"
#include "tern/models/qwen3_5_decoder.h"

namespace tern {

namespace {

SparseMoeShape routed_experts(const io::ModelConfig& config) {
  SparseMoeShape moe;
  moe.hidden = config.hidden_size;
  moe.n_expert = qwen35_int_key(config, "num_experts");
  moe.n_expert_used = qwen35_int_key(config, "num_experts_per_tok");
  moe.expert_inter = qwen35_int_key(config, "moe_intermediate_size");
  moe.norm_topk_prob = true;  // the Qwen3.5-MoE router always renormalises its top-k weights
  return moe;
}

}  // namespace

ModelShape shape_qwen3_5_moe(const io::ModelConfig& config) {
  const SparseMoeShape m = routed_experts(config);
  return {qwen35_cache_layout(config), {config.n_layer, m.n_expert, m.n_expert_used, m.expert_params()}};
}

std::unique_ptr<Model> load_qwen3_5_moe(const std::string& dir, const io::ModelConfig& config,
                                        const LoadOptions& options) {
  const SparseMoeShape moe = routed_experts(config);
  const int64_t shared_inter = qwen35_int_key(config, "shared_expert_intermediate_size");
  Qwen35Spec spec;
  spec.make_ffn = [moe, shared_inter](const WeightLoader& w, int64_t) -> Qwen35FeedForward {
    return SharedExpertMoe::load(w, moe, shared_inter);
  };
  return std::make_unique<Qwen35Decoder>(dir, config, options, spec);
}

}  // namespace tern
