// Qwen3.5 (Qwen3_5ForConditionalGeneration / Qwen3_5ForCausalLM, text model): the gated DeltaNet /
// gated full-attention hybrid with a dense SwiGLU MLP in every layer.
#include "tern/models/architectures.h"
#include "tern/models/qwen3_5_decoder.h"

namespace tern {

ModelShape shape_qwen3_5(const io::ModelConfig& config) { return {qwen35_cache_layout(config), {}}; }

std::unique_ptr<Model> load_qwen3_5(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
  TERN_CHECK(config.intermediate_size > 0, "[config] {}: expected intermediate_size > 0 for qwen3_5, got {}", config.path,
             config.intermediate_size);
  Qwen35Spec spec;
  spec.make_ffn = [&config](const WeightLoader& w, int64_t) -> Qwen35FeedForward {
    return GatedMlp::load(w, config.hidden_size, config.intermediate_size, GatedMlp::Act::silu, config.mlp_bias);
  };
  return std::make_unique<Qwen35Decoder>(dir, config, options, spec);
}

}  // namespace tern
