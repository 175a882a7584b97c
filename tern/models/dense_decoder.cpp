// DenseDecoder: loading and the forward pass over per-layer plain KV caches.
#include "tern/models/dense_decoder.h"

#include "tern/base/log.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"
#include "tern/ops/norm_linear.h"
#include "tern/state/kv_cache_options.h"

namespace tern {

LmHead load_lm_head(const io::WeightStore& store, const io::ModelConfig& c, const Tensor& embed_table,
                    const LoadOptions& options, const std::string& dir) {
  std::string name;
  for (const std::string& p : {std::string("lm_head.weight"), std::string("language_model.lm_head.weight")})
    if (store.has(p)) name = p;
  if (c.tie_word_embeddings || name.empty()) {
    TERN_CHECK(c.tie_word_embeddings, "[model] {}: expected lm_head.weight (tie_word_embeddings is false), got no such tensor",
               dir);
    return {embed_table, name};
  }
  return {WeightLoader(store, "", options.device, options.dtype).get_matrix(name, {c.vocab_size, c.hidden_size}), name};
}

const std::vector<std::string>& text_model_prefixes() {
  static const std::vector<std::string> p = {"model.", "model.language_model.", "language_model.model.", ""};
  return p;
}

DenseDecoder::DenseDecoder(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options,
                           const DenseDecoderSpec& spec) {
  config_ = config;
  options_ = options;
  io::WeightStore store = io::WeightStore::open(dir);
  std::string prefix = store.find_prefix(text_model_prefixes(), "embed_tokens.weight");
  WeightLoader w(store, prefix, options.device, options.dtype);
  const auto& c = config_;
  TERN_CHECK(c.n_head % c.n_head_kv == 0, "[model] {}: expected num_attention_heads divisible by num_key_value_heads, got {} and {}",
             dir, c.n_head, c.n_head_kv);

  embed_ = Embedding::load(w, "embed_tokens", c.vocab_size, c.hidden_size);
  AttentionShape attn{c.hidden_size, c.n_head, c.n_head_kv, c.head_dim, c.attention_bias, spec.qk_norm,
                      static_cast<float>(c.rms_norm_eps)};
  ops::RopeTable rope = ops::rope_table(c.rope);
  GatedMlp::Act act = mlp_act_from_name(c.hidden_act);
  blocks_.reserve(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    WeightLoader lw = w.sub("layers." + std::to_string(i) + ".");
    if (spec.make_ffn) blocks_.push_back(DecoderBlock::load(lw, attn, rope, spec.make_ffn(lw.sub("mlp."), i)));
    else blocks_.push_back(DecoderBlock::load(lw, attn, rope, c.intermediate_size, act, c.mlp_bias));
  }
  final_norm_ = RMSNorm::load(w, "norm", c.hidden_size, static_cast<float>(c.rms_norm_eps));

  LmHead head = load_lm_head(store, c, embed_.table, options, dir);
  lm_head_ = head.weight;
  const std::string& head_name = head.name;

  n_params_ = 0;
  for (const auto& name : store.names()) {
    if (c.tie_word_embeddings && name == head_name) continue;
    if (name.rfind(prefix, 0) != 0 && name != head_name) continue;
    n_params_ += numel(store.entry(name).shape);
  }
  log_debug("loaded {} ({} layers, {} parameters) from {}", c.model_type, c.n_layer, n_params_, dir);
}

CacheList DenseDecoder::make_caches(const KVCacheOptions& kv) const {
  CacheList caches;
  for (int64_t i = 0; i < config_.n_layer; ++i) caches.push_back(make_kv_cache(kv, {.attention_index = i, .attention_layers = config_.n_layer}));
  return caches;
}

Tensor DenseDecoder::forward(const Tensor& ids, CacheList& caches, bool all_logits) const {
  return forward_device(ids, caches, all_logits).to(Device::cpu());
}

// Every block's decode-sized forward queues device work only: the dense MLP, and a mixture of experts
// up to 8 rows (its grouped path reads the routing on the device; larger batches sort on the host, and a
// compiled decoder then falls back to eager steps).
bool DenseDecoder::can_capture_decode() const { return options_.device.is_cuda(); }

Tensor DenseDecoder::forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const {
  TERN_CHECK(ids.rank() == 2 && ids.dtype() == Dtype::i32, "[model] expected ids [B, L] i32, got {} {}",
             shape_str(ids.shape()), dtype_name(ids.dtype()));
  TERN_CHECK(static_cast<int64_t>(caches.size()) == config_.n_layer, "[model] expected {} caches, got {}",
             config_.n_layer, caches.size());
  DecoderBlock::Residual r{embed_.forward(ids.to(options_.device)), Tensor()};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    auto* kv = dynamic_cast<KVCache*>(caches[i].get());
    TERN_CHECK(kv != nullptr, "[model] expected a KV cache for layer {}, got {}", i, caches[i]->signature());
    r = blocks_[i].forward(r, *kv);
  }
  if (!all_logits && r.stream.size(1) > 1) {
    const int64_t L = r.stream.size(1);
    r.stream = r.stream.slice(1, L - 1, L);
    r.pending = r.pending.defined() ? r.pending.slice(1, L - 1, L) : r.pending;
  }
  Tensor logits =
      ops::norm_linear(ops::PreNorm{r.stream, r.pending, final_norm_.weight, final_norm_.eps}, lm_head_).out;
  if (logits.dtype() != Dtype::f32) logits = ops::cast(logits, Dtype::f32);
  return logits;
}

}  // namespace tern
