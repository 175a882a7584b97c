// Gemma 4 text (Gemma4ForCausalLM, and the text model of Gemma4ForConditionalGeneration): sliding and
// full attention layers (ring caches on sliding ones), q/k/v norms with attention scale 1, per-layer-type
// RoPE (proportional on full layers), embeddings scaled by sqrt(hidden), per-layer input embeddings,
// KV sharing in the last layers, sandwich norms and a per-layer scalar, GeGLU, an optional MoE block
// beside the dense MLP, and a final logit softcap.
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "tern/base/log.h"
#include "tern/io/json_util.h"
#include "tern/io/weights.h"
#include "tern/layers/gemma_attention.h"
#include "tern/layers/gemma_moe.h"
#include "tern/layers/mlp.h"
#include "tern/layers/per_layer_input.h"
#include "tern/models/architectures.h"
#include "tern/models/dense_decoder.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"

namespace tern {
namespace {

const char* const kSliding = "sliding_attention";
const char* const kFull = "full_attention";

// What config.json says about one decoder layer.
struct LayerSpec {
  std::string type;     // sliding_attention | full_attention
  int64_t head_dim = 0;
  int64_t n_head_kv = 0;
  int64_t donor = -1;   // >= 0: the earlier layer whose K/V this layer reads (KV sharing)
  bool keeps_read = false;  // a later layer reads this layer's K/V
  int64_t inter = 0;    // dense MLP width
};

struct Gemma4Spec {
  std::vector<LayerSpec> layers;
  int64_t window = 0;
  bool k_eq_v = false;
  int64_t per_layer_dim = 0, per_layer_vocab = 0;
  std::optional<GemmaMoeShape> moe;
  float final_softcap = 0.0f;
};

// The per_layer_config entry of layer i, or nullptr. transformers writes the keys as layer indices,
// zero-padded to the width of the largest ("05" of 42 layers, "2" of 6); every key must be one.
const nlohmann::json* per_layer_entry(const nlohmann::json& overrides, int64_t i, const io::ModelConfig& c) {
  const nlohmann::json* found = nullptr;
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    const int64_t index = digits ? std::stoll(key) : -1;
    TERN_CHECK(digits && index < c.n_layer && it->is_object(),
               "[config] {}: expected per_layer_config keys to be layer indices below {} with object values, got '{}'",
               c.path, c.n_layer, key);
    if (index == i) found = &*it;
  }
  return found;
}

Gemma4Spec parse_spec(const io::ModelConfig& c) {
  const io::JsonReader t(c.text, c.path, "");
  Gemma4Spec s;
  s.window = c.sliding_window;
  s.k_eq_v = t.opt_bool("attention_k_eq_v").value_or(false);
  s.per_layer_dim = t.opt_int("hidden_size_per_layer_input").value_or(0);
  s.per_layer_vocab = t.opt_int("vocab_size_per_layer_input").value_or(c.vocab_size);
  const double softcap = t.opt_double("final_logit_softcapping").value_or(0.0);
  TERN_CHECK(softcap >= 0 && softcap <= 1e30, "[config] {}: expected final_logit_softcapping in [0, 1e30], got {}",
             c.path, softcap);
  s.final_softcap = static_cast<float>(softcap);
  const int64_t n_shared = t.opt_int("num_kv_shared_layers").value_or(0);
  TERN_CHECK(n_shared >= 0 && n_shared < c.n_layer, "[config] {}: expected num_kv_shared_layers in [0, {}), got {}",
             c.path, c.n_layer, n_shared);
  const bool double_wide = t.opt_bool("use_double_wide_mlp").value_or(false);
  // Full layers: per_layer_config overrides (transformers 5.17 spelling), else global_head_dim and,
  // with attention_k_eq_v, num_global_key_value_heads.
  const int64_t global_head_dim = t.opt_int("global_head_dim").value_or(512);
  const std::optional<int64_t> global_kv = t.opt_int("num_global_key_value_heads");
  const nlohmann::json* overrides = t.find("per_layer_config");
  const int64_t first_shared = c.n_layer - n_shared;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerSpec l;
    l.type = c.layer_types[static_cast<size_t>(i)];
    TERN_CHECK(l.type == kSliding || l.type == kFull, "[config] {}: expected layer_types of {} or {}, got '{}'", c.path,
               kSliding, kFull, l.type);
    TERN_CHECK(l.type != kSliding || s.window > 0, "[config] {}: expected sliding_window > 0 for sliding layers, got {}",
               c.path, s.window);
    l.head_dim = c.head_dim;
    l.n_head_kv = c.n_head_kv;
    if (overrides && overrides->is_object()) {
      if (const nlohmann::json* o = per_layer_entry(*overrides, i, c)) {
        const io::JsonReader r(*o, c.path, "per_layer_config." + std::to_string(i) + ".");
        l.head_dim = r.opt_int("head_dim").value_or(l.head_dim);
        l.n_head_kv = r.opt_int("num_key_value_heads").value_or(l.n_head_kv);
      }
    } else if (l.type == kFull) {
      l.head_dim = global_head_dim;
      if (s.k_eq_v && global_kv) l.n_head_kv = *global_kv;
    }
    l.inter = c.intermediate_size * (double_wide && n_shared > 0 && i >= first_shared ? 2 : 1);
    if (n_shared > 0 && i >= first_shared) {
      for (int64_t j = first_shared - 1; j >= 0; --j) {
        if (s.layers[static_cast<size_t>(j)].type == l.type) {
          l.donor = j;
          break;
        }
      }
      TERN_CHECK(l.donor >= 0, "[config] {}: expected a layer of type {} before layer {} to share K/V with, got none",
                 c.path, l.type, first_shared);
      s.layers[static_cast<size_t>(l.donor)].keeps_read = true;
    }
    s.layers.push_back(l);
  }
  if (t.opt_bool("enable_moe_block").value_or(false)) {
    GemmaMoeShape m;
    m.hidden = c.hidden_size;
    m.n_expert = t.req_int("num_experts");
    m.n_expert_used = t.req_int("top_k_experts");
    m.expert_inter = t.req_int("moe_intermediate_size");
    m.norm_eps = static_cast<float>(c.rms_norm_eps);
    s.moe = m;
  }
  return s;
}

// Sliding layers: their ring; full layers: full (at their own head_dim and KV heads); KV-sharing layers
// hold nothing.
std::vector<LayerCacheSpec> gemma4_cache_layout(const Gemma4Spec& spec) {
  std::vector<LayerCacheSpec> out;
  for (const LayerSpec& l : spec.layers) {
    LayerCacheSpec s{.n_head_kv = l.n_head_kv, .head_dim = l.head_dim, .value_dim = l.head_dim};
    if (l.donor >= 0) s = {.kind = LayerCacheSpec::shared};
    else if (l.type == kSliding) s.kind = LayerCacheSpec::sliding, s.window = spec.window;
    out.push_back(s);
  }
  return out;
}

// The rope of a layer type at a layer's head size (full layers are wider than sliding ones).
ops::RopeTable layer_rope(const io::ModelConfig& c, const std::string& type, int64_t head_dim) {
  ops::RopeConfig r = c.rope_for(type);
  double partial = 1.0;
  if (const auto* rp = c.text.contains("rope_parameters") ? &c.text["rope_parameters"] : nullptr;
      rp && rp->is_object() && rp->contains(type) && (*rp)[type].is_object()) {
    partial = io::JsonReader((*rp)[type], c.path, "rope_parameters." + type + ".")
                  .opt_double("partial_rotary_factor")
                  .value_or(1.0);
  }
  r.head_dim = head_dim;
  r.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial) / 2 * 2;
  return ops::rope_table(r);
}

// One decoder layer: x + post_attn_norm(attn(input_norm(x))), then h + post_ffn_norm(ffn), the ffn
// being the GeGLU MLP (and, with the MoE block, post_norm_1(mlp) + post_norm_2(moe)); then the
// per-layer input gate, and the whole stream times layer_scalar.
struct Gemma4Layer {
  LayerSpec spec;
  RMSNorm input_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm;
  GemmaAttention attn;
  GatedMlp mlp;
  std::optional<GemmaMoe> moe;
  RMSNorm post_ffn_norm_1, pre_ffn_norm_2, post_ffn_norm_2;
  std::optional<PerLayerInputGate> per_layer;
  float layer_scalar = 1.0f;

  Tensor feed_forward(const Tensor& h) const {
    Tensor f = mlp.forward(pre_ffn_norm.forward(h));
    if (moe) {
      Tensor f2 = post_ffn_norm_2.forward(moe->forward(h, pre_ffn_norm_2.forward(h)));
      f = post_ffn_norm_1.forward(f);
      ops::binary_(f, f2, ops::BinaryOp::add);
    }
    return post_ffn_norm.forward(f);
  }

  // attn_out: this layer's attention output [B, L, hidden]; per_layer_input [B, L, dim] or undefined.
  Tensor finish(const Tensor& x, const Tensor& attn_out, const Tensor& per_layer_input) const {
    Tensor h = post_attn_norm.forward(attn_out);
    ops::binary_(h, x, ops::BinaryOp::add);
    Tensor out = feed_forward(h);
    ops::binary_(out, h, ops::BinaryOp::add);
    if (per_layer) out = per_layer->forward(out, per_layer_input);
    if (layer_scalar != 1.0f) out = ops::scale(out, layer_scalar);
    return out;
  }
};

class Gemma4Model : public Model {
 public:
  Gemma4Model(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
    config_ = config;
    options_ = options;
    spec_ = parse_spec(config_);
    const auto& c = config_;
    const float eps = static_cast<float>(c.rms_norm_eps);
    io::WeightStore store = io::WeightStore::open(dir);
    const std::string prefix = store.find_prefix(text_model_prefixes(), "embed_tokens.weight");
    WeightLoader w(store, prefix, options.device, options.dtype);

    embed_ = Embedding::load(w, "embed_tokens", c.vocab_size, c.hidden_size);
    if (spec_.per_layer_dim > 0) {
      per_layer_embed_ = PerLayerEmbedding::load(w, spec_.per_layer_vocab, c.hidden_size, c.n_layer,
                                                 spec_.per_layer_dim, eps);
    }
    const GatedMlp::Act act = mlp_act_from_name(c.hidden_act);
    for (int64_t i = 0; i < c.n_layer; ++i) {
      const LayerSpec& ls = spec_.layers[static_cast<size_t>(i)];
      WeightLoader lw = w.sub("layers." + std::to_string(i) + ".");
      Gemma4Layer l;
      l.spec = ls;
      l.input_norm = RMSNorm::load(lw, "input_layernorm", c.hidden_size, eps);
      l.post_attn_norm = RMSNorm::load(lw, "post_attention_layernorm", c.hidden_size, eps);
      l.pre_ffn_norm = RMSNorm::load(lw, "pre_feedforward_layernorm", c.hidden_size, eps);
      l.post_ffn_norm = RMSNorm::load(lw, "post_feedforward_layernorm", c.hidden_size, eps);
      GemmaAttentionShape as{c.hidden_size, c.n_head, ls.n_head_kv, ls.head_dim,
                             spec_.k_eq_v && ls.type == kFull, ls.donor >= 0, eps};
      l.attn = GemmaAttention::load(lw.sub("self_attn."), as, layer_rope(c, ls.type, ls.head_dim));
      l.mlp = GatedMlp::load(lw.sub("mlp."), c.hidden_size, ls.inter, act, false);
      if (spec_.moe) {
        l.moe = GemmaMoe::load(lw, *spec_.moe);
        l.post_ffn_norm_1 = RMSNorm::load(lw, "post_feedforward_layernorm_1", c.hidden_size, eps);
        l.pre_ffn_norm_2 = RMSNorm::load(lw, "pre_feedforward_layernorm_2", c.hidden_size, eps);
        l.post_ffn_norm_2 = RMSNorm::load(lw, "post_feedforward_layernorm_2", c.hidden_size, eps);
      }
      if (spec_.per_layer_dim > 0) l.per_layer = PerLayerInputGate::load(lw, c.hidden_size, spec_.per_layer_dim, eps);
      if (lw.has("layer_scalar")) {
        l.layer_scalar = ops::cast(lw.get("layer_scalar", {1}).to(Device::cpu()), Dtype::f32).item<float>();
      }
      layers_.push_back(std::move(l));
    }
    final_norm_ = RMSNorm::load(w, "norm", c.hidden_size, eps);
    TERN_CHECK(c.tie_word_embeddings || store.has("lm_head.weight"),
               "[model] {}: expected lm_head.weight (tie_word_embeddings is false), got no such tensor", dir);
    lm_head_ = c.tie_word_embeddings ? embed_.table
                                     : WeightLoader(store, "", options.device, options.dtype)
                                           .get_matrix("lm_head.weight", {c.vocab_size, c.hidden_size});
    // The embeddings are scaled by sqrt(hidden) as an f32 value (the reference's weight dtype here).
    embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
    account_tensors(store, prefix, dir);
  }

  CacheList make_caches(const KVCacheOptions& kv) const override {
    int64_t owners = 0;
    for (const auto& l : layers_) owners += l.spec.donor < 0 ? 1 : 0;
    CacheList caches;
    int64_t index = 0;
    for (const auto& l : layers_) {
      if (l.spec.donor >= 0) {
        caches.push_back(nullptr);  // reads its donor's K/V
        continue;
      }
      // Full layers take TurboQuant's deferred read (head_dim 512: one inverse rotation per output row
      // instead of one per stored value row).
      caches.push_back(make_kv_cache(kv, {.attention_index = index++,
                                          .attention_layers = owners,
                                          .window = l.spec.type == kSliding ? spec_.window : 0,
                                          .deferred_values = l.spec.type == kFull}));
    }
    return caches;
  }

  std::vector<LayerCacheSpec> cache_layout() const override { return gemma4_cache_layout(spec_); }

  Tensor forward(const Tensor& ids, CacheList& caches, bool all_logits) const override {
    return forward_device(ids, caches, all_logits).to(Device::cpu());
  }

  // Every layer queues device work only (the mixture of experts up to 8 rows, as in DenseDecoder), so
  // a compiled decoder can capture the step; the ring caches follow its device positions.
  bool can_capture_decode() const override { return options_.device.is_cuda(); }

  Tensor forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const override {
    TERN_CHECK(ids.rank() == 2 && ids.dtype() == Dtype::i32, "[model] expected ids [B, L] i32, got {} {}",
               shape_str(ids.shape()), dtype_name(ids.dtype()));
    TERN_CHECK(caches.size() == layers_.size(), "[model] expected {} caches, got {}", layers_.size(), caches.size());
    const int64_t L = ids.size(1);
    Tensor dev_ids = ids.to(options_.device);
    Tensor x = ops::scale(embed_.forward(dev_ids), embed_scale_);
    Tensor per_layer;  // [B, L, n_layer, dim]
    if (per_layer_embed_) per_layer = per_layer_embed_->forward(dev_ids, x);
    // Reads kept for the KV-sharing layers, and the positions of that append, by donor layer.
    std::map<int64_t, std::unique_ptr<AttentionRead>> reads;
    std::map<int64_t, Tensor> read_positions;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Gemma4Layer& l = layers_[i];
      Tensor h = l.input_norm.forward(x);
      Tensor a;
      if (l.spec.donor >= 0) {
        auto it = reads.find(l.spec.donor);
        TERN_ASSERT(it != reads.end(), "[model] layer {} has no read from donor {}", i, l.spec.donor);
        a = l.attn.forward_shared(h, *it->second, read_positions.at(l.spec.donor));
      } else {
        auto* kv = dynamic_cast<KVCache*>(caches[i].get());
        TERN_CHECK(kv != nullptr, "[model] expected a KV cache for layer {}, got {}", i,
                   caches[i] ? caches[i]->signature() : std::string("none"));
        if (l.spec.keeps_read) read_positions[static_cast<int64_t>(i)] = kv->next_positions(L);
        a = l.attn.forward(h, *kv, l.spec.keeps_read ? &reads[static_cast<int64_t>(i)] : nullptr);
      }
      Tensor pli = per_layer.defined() ? per_layer.select(2, static_cast<int64_t>(i)) : Tensor();
      x = l.finish(x, a, pli);
    }
    if (!all_logits && L > 1) x = x.slice(1, L - 1, L);
    Tensor logits = ops::linear(final_norm_.forward(x), lm_head_);
    // The softcap on f32 logits: a bf16 model would round its result a second time.
    if (logits.dtype() != Dtype::f32) logits = ops::cast(logits, Dtype::f32);
    if (spec_.final_softcap > 0.0f) logits = ops::softcap(logits, spec_.final_softcap);
    return logits;
  }

 private:
  // Counts the text model's parameters and logs one line naming what it leaves out (the vision/audio
  // towers of a multimodal checkpoint).
  void account_tensors(const io::WeightStore& store, const std::string& prefix, const std::string& dir) {
    std::set<std::string> groups;
    int64_t skipped = 0;
    n_params_ = 0;
    for (const auto& name : store.names()) {
      if (name.rfind(prefix, 0) == 0) {
        n_params_ += numel(store.entry(name).shape);
        continue;
      }
      if (name == "lm_head.weight" && !config_.tie_word_embeddings) {
        n_params_ += numel(store.entry(name).shape);
        continue;
      }
      ++skipped;
      const size_t second = name.find('.', name.find('.') + 1);
      groups.insert(name.substr(0, second));
    }
    std::string list;
    for (const auto& g : groups) list += (list.empty() ? "" : ", ") + g + ".*";
    if (skipped == 0 && prefix == "model.") {
      log_debug("gemma4: loaded {} layers from {}", config_.n_layer, dir);
      return;
    }
    log_info("gemma4: loaded the text model ({}*, {} layers) from {}; skipped {} tensors{}{}", prefix,
             config_.n_layer, dir, skipped, skipped ? ": " : "", list);
  }

  Gemma4Spec spec_;
  Embedding embed_;
  float embed_scale_ = 1.0f;
  std::optional<PerLayerEmbedding> per_layer_embed_;
  std::vector<Gemma4Layer> layers_;
  RMSNorm final_norm_;
  Tensor lm_head_;  // [vocab, hidden]; the embedding table when tied
};

}  // namespace

ModelShape shape_gemma4(const io::ModelConfig& config) {
  const Gemma4Spec s = parse_spec(config);
  ModelShape out{gemma4_cache_layout(s), {}};
  if (s.moe) out.experts = {config.n_layer, s.moe->n_expert, s.moe->n_expert_used, s.moe->expert_params()};  // every layer
  return out;
}

std::unique_ptr<Model> load_gemma4(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options) {
  return std::make_unique<Gemma4Model>(dir, config, options);
}

}  // namespace tern
