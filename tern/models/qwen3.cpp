// Qwen3 (Qwen3ForCausalLM): GQA with per-head q/k RMSNorm before RoPE, SwiGLU, tied or untied head.
#include "tern/models/architectures.h"
#include "tern/models/dense_decoder.h"

namespace tern {

std::unique_ptr<Model> load_qwen3(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
  return std::make_unique<DenseDecoder>(dir, config, options, DenseDecoderSpec{.qk_norm = true, .make_ffn = {}});
}

}  // namespace tern
