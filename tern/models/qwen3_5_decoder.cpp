// Qwen35Decoder: loading (text model of a multimodal or text-only checkpoint) and the hybrid forward.
#include "tern/models/qwen3_5_decoder.h"

#include <algorithm>
#include <map>

#include "tern/base/log.h"
#include "tern/layers/zero_centered_rms_norm.h"
#include "tern/models/dense_decoder.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"
#include "tern/state/kv_cache_options.h"

namespace tern {
namespace {

constexpr const char* kLinear = "linear_attention";
constexpr const char* kFull = "full_attention";

// "model.visual.blocks.0.x" -> "model.visual"; "mtp.fc.weight" -> "mtp"
std::string group_of(const std::string& name) {
  size_t dot = name.find('.');
  if (dot != std::string::npos && name.compare(0, dot, "model") == 0) dot = name.find('.', dot + 1);
  return name.substr(0, dot);
}

}  // namespace

int64_t qwen35_int_key(const io::ModelConfig& c, const char* name, std::optional<int64_t> fallback) {
  auto it = c.text.find(name);
  if (it == c.text.end() || it->is_null()) {
    TERN_CHECK(fallback.has_value(), "[config] {}: expected key '{}' for {}, got none", c.path, name, c.model_type);
    return *fallback;
  }
  TERN_CHECK(it->is_number_integer(), "[config] {}: expected '{}' to be an integer, got {}", c.path, name, it->dump());
  return it->get<int64_t>();
}

namespace {

void check_layer_types(const io::ModelConfig& c) {
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    const std::string& t = c.layer_types[i];
    TERN_CHECK(t == kLinear || t == kFull,
               "[config] {}: unsupported layer type '{}' at layer_types[{}] (supported: linear_attention, full_attention)",
               c.path, t, i);
  }
}

}  // namespace

GatedDeltaNetShape qwen35_linear_shape(const io::ModelConfig& c) {
  if (std::find(c.layer_types.begin(), c.layer_types.end(), kLinear) == c.layer_types.end()) return {};
  return GatedDeltaNetShape{.hidden = c.hidden_size,
                            .n_k_head = qwen35_int_key(c, "linear_num_key_heads"),
                            .n_v_head = qwen35_int_key(c, "linear_num_value_heads"),
                            .d_k = qwen35_int_key(c, "linear_key_head_dim"),
                            .d_v = qwen35_int_key(c, "linear_value_head_dim"),
                            .conv_kernel = qwen35_int_key(c, "linear_conv_kernel_dim", 4),
                            .norm_eps = static_cast<float>(c.rms_norm_eps)};
}

std::vector<LayerCacheSpec> qwen35_cache_layout(const io::ModelConfig& c) {
  check_layer_types(c);
  const RecurrentShape s = GatedDeltaNet::cache_shape(qwen35_linear_shape(c));
  std::vector<LayerCacheSpec> out;
  for (const std::string& t : c.layer_types) {
    if (t == kLinear) {
      const int64_t f32 = 4;
      out.push_back({.kind = LayerCacheSpec::recurrent,
                     .fixed_bytes = f32 * ((s.conv_kernel - 1) * s.conv_dim + s.n_v_head * s.d_k * s.d_v)});
    } else {
      out.push_back({.kind = LayerCacheSpec::full,
                     .n_head_kv = c.n_head_kv,
                     .head_dim = c.head_dim,
                     .value_dim = c.head_dim});
    }
  }
  return out;
}

Qwen35Decoder::Qwen35Decoder(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options,
                             const Qwen35Spec& spec) {
  config_ = config;
  options_ = options;
  const auto& c = config_;
  check_layer_types(c);
  TERN_CHECK(c.hidden_act == "silu", "[config] {}: expected hidden_act silu for {}, got '{}'", c.path, c.model_type,
             c.hidden_act);
  io::WeightStore store = io::WeightStore::open(dir);
  std::string prefix = store.find_prefix(text_model_prefixes(), "embed_tokens.weight");
  WeightLoader w(store, prefix, options.device, options.dtype);
  const float eps = static_cast<float>(c.rms_norm_eps);

  embed_ = Embedding::load(w, "embed_tokens", c.vocab_size, c.hidden_size);
  GatedAttentionShape attn{c.hidden_size, c.n_head, c.n_head_kv, c.head_dim, c.attention_bias, eps};
  const GatedDeltaNetShape lin = qwen35_linear_shape(c);
  ops::RopeTable rope = ops::rope_table(c.rope_for(kFull));
  blocks_.reserve(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    WeightLoader lw = w.sub("layers." + std::to_string(i) + ".");
    const bool linear = c.layer_types[i] == kLinear;
    Block b{load_zero_centered_rms_norm(lw, "input_layernorm", c.hidden_size, eps),
            load_zero_centered_rms_norm(lw, "post_attention_layernorm", c.hidden_size, eps),
            linear ? std::variant<GatedDeltaNet, GatedAttention>(GatedDeltaNet::load(lw.sub("linear_attn."), lin))
                   : std::variant<GatedDeltaNet, GatedAttention>(GatedAttention::load(lw.sub("self_attn."), attn, rope)),
            spec.make_ffn(lw.sub("mlp."), i)};
    blocks_.push_back(std::move(b));
    n_full_ += linear ? 0 : 1;
  }
  final_norm_ = load_zero_centered_rms_norm(w, "norm", c.hidden_size, eps);

  LmHead head = load_lm_head(store, c, embed_.table, options, dir);
  lm_head_ = head.weight;
  const std::string& head_name = head.name;

  // Count what was loaded; name what was not (vision tower, MTP head, ...) in one line.
  std::map<std::string, int64_t> skipped;
  n_params_ = 0;
  for (const auto& name : store.names()) {
    if (name == head_name) {
      if (!c.tie_word_embeddings) n_params_ += numel(store.entry(name).shape);
    } else if (name.rfind(prefix, 0) == 0 && name.rfind("mtp.", 0) != 0) {
      n_params_ += numel(store.entry(name).shape);
    } else {
      ++skipped[group_of(name)];
    }
  }
  if (!skipped.empty() || c.model_type != c.text_model_type) {
    std::string what;
    for (const auto& [g, n] : skipped) what += (what.empty() ? "" : ", ") + g + ".* (" + std::to_string(n) + " tensors)";
    log_info("{}: loaded the text model ({}{}); skipped {}", c.model_type, prefix.empty() ? "top level" : prefix + "*",
             head_name.empty() ? "" : " and " + head_name, what.empty() ? "nothing" : what);
  }
  log_debug("loaded {} ({} layers, {} full attention, {} parameters) from {}", c.model_type, c.n_layer, n_full_,
            n_params_, dir);
}

CacheList Qwen35Decoder::make_caches(const KVCacheOptions& kv) const {
  CacheList caches;
  int64_t attention_index = 0;
  for (const Block& b : blocks_) {
    if (const auto* lin = std::get_if<GatedDeltaNet>(&b.mixer)) {
      caches.push_back(lin->make_cache());
    } else {
      caches.push_back(make_kv_cache(kv, {.attention_index = attention_index++, .attention_layers = n_full_}));
    }
  }
  return caches;
}

std::vector<LayerCacheSpec> Qwen35Decoder::cache_layout() const { return qwen35_cache_layout(config_); }

Tensor Qwen35Decoder::forward(const Tensor& ids, CacheList& caches, bool all_logits) const {
  return forward_device(ids, caches, all_logits).to(Device::cpu());
}

// Every layer queues device work only (the DeltaNet layers update their conv history and state in
// place; a mixture of experts up to 8 rows, as in DenseDecoder).
bool Qwen35Decoder::can_capture_decode() const { return options_.device.is_cuda(); }

Tensor Qwen35Decoder::forward_device(const Tensor& ids, CacheList& caches, bool all_logits) const {
  TERN_CHECK(ids.rank() == 2 && ids.dtype() == Dtype::i32, "[model] expected ids [B, L] i32, got {} {}",
             shape_str(ids.shape()), dtype_name(ids.dtype()));
  TERN_CHECK(caches.size() == blocks_.size(), "[model] expected {} caches, got {}", blocks_.size(), caches.size());
  Tensor x = embed_.forward(ids.to(options_.device));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    TERN_CHECK(caches[i] != nullptr, "[model] expected a cache for layer {}, got none", i);
    Tensor normed = b.input_norm.forward(x);
    Tensor h;
    if (const auto* lin = std::get_if<GatedDeltaNet>(&b.mixer)) {
      auto* rc = dynamic_cast<RecurrentCache*>(caches[i].get());
      TERN_CHECK(rc != nullptr, "[model] expected a recurrent cache for layer {}, got {}", i, caches[i]->signature());
      h = lin->forward(normed, *rc);
    } else {
      auto* kv = dynamic_cast<KVCache*>(caches[i].get());
      TERN_CHECK(kv != nullptr, "[model] expected a KV cache for layer {}, got {}", i, caches[i]->signature());
      h = std::get<GatedAttention>(b.mixer).forward(normed, *kv);
    }
    ops::binary_(h, x, ops::BinaryOp::add);
    Tensor normed2 = b.post_attn_norm.forward(h);
    Tensor out = std::visit([&](const auto& f) { return f.forward(normed2); }, b.ffn);
    ops::binary_(out, h, ops::BinaryOp::add);
    x = out;
  }
  if (!all_logits && x.size(1) > 1) x = x.slice(1, x.size(1) - 1, x.size(1));
  x = final_norm_.forward(x);
  Tensor logits = ops::linear(x, lm_head_);
  if (logits.dtype() != Dtype::f32) logits = ops::cast(logits, Dtype::f32);
  return logits;
}

}  // namespace tern
