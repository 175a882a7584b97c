// The model interface every architecture implements, and the options it is loaded with.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tern/core/tensor.h"
#include "tern/io/model_config.h"
#include "tern/models/cache_layout.h"
#include "tern/state/cache.h"
#include "tern/state/kv_cache_options.h"

namespace tern {

using CacheList = std::vector<std::unique_ptr<Cache>>;

// The routed experts of a mixture-of-experts model (zeros for a dense one): the MoE layers, each layer's
// experts and those a token takes, and one expert's parameters.
struct RoutedExperts {
  int64_t layers = 0, per_layer = 0, per_token = 0, params_each = 0;
  // The parameters of the experts a token does not take, over all MoE layers.
  int64_t idle_params() const { return layers * (per_layer - per_token) * params_each; }
};

// What a model's config says of it without its weights (registry.h's describe_model): what each layer's
// cache holds (as Model::cache_layout) and the routed experts.
struct ModelShape {
  std::vector<LayerCacheSpec> layout;
  RoutedExperts experts;
};

// Every layer a full-attention layer of the config's KV heads and head_dim (dense and MoE decoders).
std::vector<LayerCacheSpec> default_cache_layout(const io::ModelConfig& config);

struct LoadOptions {
  Device device = Device::cpu();
  // Compute/weight dtype; f32 on CPU (bf16 checkpoints widen exactly), bf16 on CUDA.
  Dtype dtype = Dtype::f32;
};

class Model {
 public:
  virtual ~Model() = default;

  // Fresh caches for one generation (one per layer, in layer order), attention layers stored as
  // `kv` says (make_kv_cache); layers that share another layer's K/V may hold no cache (nullptr).
  virtual CacheList make_caches(const KVCacheOptions& kv = {}) const = 0;
  // ids [B, L] i32 on the CPU, appended to caches -> logits [B, L, vocab] (all_logits) or
  // [B, 1, vocab] for the last position only, f32 on the CPU.
  virtual Tensor forward(const Tensor& ids, CacheList& caches, bool all_logits) const = 0;
  // forward with ids [B, L] i32 on the CPU or the model's device, and the f32 logits left on the model's
  // device. The default copies forward's CPU logits there.
  virtual Tensor forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const {
    return forward(ids, caches, all_logits).to(options_.device);
  }
  // True when forward_device queues device work only (no host round trip for device-resident ids), so a
  // decode step can be captured as a graph (tern/engine/compiled_decode.h).
  virtual bool can_capture_decode() const { return false; }

  // What each layer's cache holds (in layer order), for memory accounting. The default: every layer a
  // full-attention layer of the config's KV heads and head_dim.
  virtual std::vector<LayerCacheSpec> cache_layout() const { return default_cache_layout(config_); }

  const io::ModelConfig& config() const { return config_; }
  const LoadOptions& options() const { return options_; }
  int64_t vocab_size() const { return config_.vocab_size; }
  // Parameters as loaded (tied embeddings counted once).
  int64_t n_params() const { return n_params_; }

 protected:
  io::ModelConfig config_;
  LoadOptions options_;
  int64_t n_params_ = 0;
};

}  // namespace tern
