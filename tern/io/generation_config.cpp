// generation_config.json parsing with fallbacks to config.json's token ids.
#include "tern/io/generation_config.h"

#include <filesystem>
#include <limits>

#include "tern/base/file.h"
#include "tern/io/json_util.h"

namespace tern::io {

GenerationConfig load_generation_config(const std::string& model_dir, const ModelConfig& config) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(model_dir) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return parse_generation_config("{}", path, config);
  return parse_generation_config(read_file(path, "generation_config"), path, config);
}

GenerationConfig parse_generation_config(const std::string& text, const std::string& path, const ModelConfig& config) {
  GenerationConfig g;
  g.eos_token_ids = config.eos_token_ids;
  g.bos_token_id = config.bos_token_id;
  g.pad_token_id = config.pad_token_id;
  const nlohmann::json j = parse_json_text(text, path, "generation_config");
  TERN_CHECK(j.is_object(), "[generation_config] {}: expected a JSON object, got {}", path, j.type_name());
  const JsonReader r(j, path, "", "generation_config");

  auto single_id = [&](const char* key) -> std::optional<int32_t> {
    if (!r.has(key)) return std::nullopt;
    std::vector<int32_t> ids = token_ids(*r.find(key), path, key, "generation_config");
    TERN_CHECK(ids.size() == 1, "[generation_config] {}: expected key '{}' to be one token id, got {}", path, key,
               json_brief(*r.find(key)));
    return ids[0];
  };
  if (r.has("eos_token_id")) g.eos_token_ids = token_ids(*r.find("eos_token_id"), path, "eos_token_id", "generation_config");
  if (auto v = single_id("bos_token_id")) g.bos_token_id = v;
  if (auto v = single_id("pad_token_id")) g.pad_token_id = v;
  g.do_sample = r.opt_bool("do_sample");
  g.temperature = r.opt_float("temperature");
  g.top_p = r.opt_float("top_p");
  g.min_p = r.opt_float("min_p");
  g.repetition_penalty = r.opt_float("repetition_penalty");
  g.top_k = r.opt_int("top_k");
  // A 32-bit count (the sampler's); a negative one is the sampler's to reject, only when it samples.
  TERN_CHECK(!g.top_k || (*g.top_k >= std::numeric_limits<int32_t>::min() &&
                          *g.top_k <= std::numeric_limits<int32_t>::max()),
             "[generation_config] {}: expected key 'top_k' to fit in 32 bits, got {}", path, *g.top_k);
  g.max_new_tokens = r.opt_int("max_new_tokens");
  return g;
}

}  // namespace tern::io
