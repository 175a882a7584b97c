// The Llama family (Llama 2/3 incl. llama3 RoPE scaling, Mistral-style configs): GQA attention without
// q/k norms, optional attention/MLP biases, SwiGLU.
#include "tern/models/architectures.h"
#include "tern/models/dense_decoder.h"

namespace tern {

std::unique_ptr<Model> load_llama(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
  return std::make_unique<DenseDecoder>(dir, config, options, DenseDecoderSpec{.qk_norm = false, .make_ffn = {}});
}

}  // namespace tern
