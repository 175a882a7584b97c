// DenseDecoder: the shared body of Llama-family architectures (embeddings, N pre-norm decoder blocks
// with GQA attention and a gated MLP, final norm, tied or untied head). qwen3.cpp and llama.cpp
// configure it; architecture files differ only in what they switch on.
#pragma once
#include <functional>

#include "tern/io/weights.h"
#include "tern/layers/decoder_block.h"
#include "tern/models/model.h"

namespace tern {

struct DenseDecoderSpec {
  bool qk_norm = false;
  // When set, builds layer i's feed-forward from its "mlp." loader (e.g. a mixture of experts on some
  // layers); otherwise every layer takes the dense gated MLP of intermediate_size.
  std::function<FeedForward(const WeightLoader& mlp, int64_t layer)> make_ffn;
};

class DenseDecoder : public Model {
 public:
  DenseDecoder(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options,
               const DenseDecoderSpec& spec);

  CacheList make_caches(const KVCacheOptions& kv = {}) const override;
  Tensor forward(const Tensor& ids, CacheList& caches, bool all_logits) const override;
  Tensor forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const override;
  bool can_capture_decode() const override;

 private:
  Embedding embed_;
  std::vector<DecoderBlock> blocks_;
  RMSNorm final_norm_;
  Tensor lm_head_;  // [vocab, hidden]; the embedding table when tied
};

// The output head beside the text model: "lm_head.weight" or, in the multimodal layout,
// "language_model.lm_head.weight" [vocab, hidden]; the embedding table when tied. name is the
// stored head tensor, loaded or not ("" when there is none). Throws "[model] ..." when untied and
// no head is stored.
struct LmHead {
  Tensor weight;
  std::string name;
};
LmHead load_lm_head(const io::WeightStore& store, const io::ModelConfig& c, const Tensor& embed_table,
                    const LoadOptions& options, const std::string& dir);

// Weight-name prefixes accepted for the text model ("model.", "model.language_model.", ...), in order.
const std::vector<std::string>& text_model_prefixes();

}  // namespace tern
