// ModelConfig: a Hugging Face config.json (transformers v4 and v5 spellings, flat or with a nested
// text_config) read into llama.cpp-style fields plus the raw text-config JSON.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tern/ops/rope.h"

namespace tern::io {

struct ModelConfig {
  std::string path;             // the config.json this came from (for error messages)
  std::string architecture;     // architectures[0] of the outer object; "" when absent
  std::string model_type;       // outer model_type ("qwen3_5" for a multimodal checkpoint)
  std::string text_model_type;  // text_config.model_type when nested, else model_type

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // 0 when absent (pure-MoE configs)
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // num_key_value_heads; n_head when absent
  int64_t head_dim = 0;   // hidden_size / n_head when absent
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;  // model-type default when absent (true for the gemma family)
  bool attention_bias = false;
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // hidden_act or hidden_activation
  int64_t max_position_embeddings = 0;
  int64_t sliding_window = 0;  // 0: none (null, absent, or use_sliding_window false)
  std::vector<std::string> layer_types;  // [n_layer]; "full_attention" each when absent

  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // eos_token_id (int or list); empty when null or absent
  std::optional<int32_t> pad_token_id;

  ops::RopeConfig rope;  // the full-attention layers' rope
  // Per-layer-type rope when rope_parameters is keyed by layer type (v5); empty otherwise.
  std::map<std::string, ops::RopeConfig> rope_by_layer_type;

  nlohmann::json text;  // the whole text-config object, for architecture-specific keys

  // The rope of a layer type: rope_by_layer_type's entry when there is one, else rope.
  const ops::RopeConfig& rope_for(const std::string& layer_type) const;
};

// Reads <model_dir>/config.json. A missing directory or file, invalid JSON (with the parser's
// position), a missing required key, a value of the wrong JSON type, an inconsistent size, or an
// unknown rope type throws tern::Error "[config] <path>: ...". Unknown model types are not rejected
// here; the model registry decides what it can run.
ModelConfig load_model_config(const std::string& model_dir);

// As load_model_config, from a parsed config object; path is used in error messages only.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& path);

// The rope types load_model_config accepts: default, linear, llama3, yarn, proportional.
bool is_known_rope_type(const std::string& type);

}  // namespace tern::io
