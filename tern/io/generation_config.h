// GenerationConfig: generation_config.json (eos ids and the checkpoint's default sampling settings).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/io/model_config.h"

namespace tern::io {

// Unset optionals mean "the file does not say"; callers apply their own defaults.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> bos_token_id, pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens;
};

// Reads <model_dir>/generation_config.json when present. eos_token_id (int or list) falls back to
// config.eos_token_ids when the file or the key is missing (or null); bos/pad fall back likewise.
// Invalid JSON, a value of the wrong type, a sampling number that is not finite or past float range,
// or a top_k past 32 bits throws "[generation_config] <path>: ...".
GenerationConfig load_generation_config(const std::string& model_dir, const ModelConfig& config);
// The same for the file's text (path names it in errors).
GenerationConfig parse_generation_config(const std::string& text, const std::string& path, const ModelConfig& config);

}  // namespace tern::io
