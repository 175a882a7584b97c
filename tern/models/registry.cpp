// Model registry: model type -> architecture loader.
#include "tern/models/registry.h"

#include <filesystem>
#include <map>

#include "tern/models/architectures.h"

namespace tern {
namespace {

using Loader = std::unique_ptr<Model> (*)(const std::string&, const io::ModelConfig&, const LoadOptions&);
using Shaper = ModelShape (*)(const io::ModelConfig&);

ModelShape shape_dense(const io::ModelConfig& config) { return {default_cache_layout(config), {}}; }

struct Architecture {
  Loader load;
  Shaper shape;
};

const std::map<std::string, Architecture>& architectures() {
  static const std::map<std::string, Architecture> m = {
      {"qwen3", {load_qwen3, shape_dense}},
      {"qwen3_moe", {load_qwen3_moe, shape_qwen3_moe}},
      {"qwen3_5", {load_qwen3_5, shape_qwen3_5}},
      {"qwen3_5_text", {load_qwen3_5, shape_qwen3_5}},
      {"qwen3_5_moe", {load_qwen3_5_moe, shape_qwen3_5_moe}},
      {"qwen3_5_moe_text", {load_qwen3_5_moe, shape_qwen3_5_moe}},
      {"llama", {load_llama, shape_dense}},
      {"mistral", {load_llama, shape_dense}},
      {"gemma4", {load_gemma4, shape_gemma4}},
      {"gemma4_text", {load_gemma4, shape_gemma4}},
  };
  return m;
}

// The architecture of a config's (text) model type, or nullptr.
const Architecture* find_architecture(const io::ModelConfig& config) {
  const std::string& type = config.text_model_type.empty() ? config.model_type : config.text_model_type;
  auto it = architectures().find(type);
  if (it == architectures().end()) it = architectures().find(config.model_type);
  return it == architectures().end() ? nullptr : &it->second;
}

// The architecture of dir's config (read into config); throws for a missing directory or unknown type.
const Architecture& architecture_of(const std::string& dir, io::ModelConfig& config) {
  TERN_CHECK(std::filesystem::is_directory(dir), "[model] expected a model directory, got '{}' (no such directory)", dir);
  config = io::load_model_config(dir);
  const Architecture* a = find_architecture(config);
  if (!a) {
    std::string list;
    for (const auto& t : supported_model_types()) list += (list.empty() ? "" : ", ") + t;
    const std::string& type = config.text_model_type.empty() ? config.model_type : config.text_model_type;
    TERN_THROW("[model] {}: unsupported architecture '{}' (supported: {})", dir, type, list);
  }
  return *a;
}

}  // namespace

std::vector<LayerCacheSpec> default_cache_layout(const io::ModelConfig& config) {
  return std::vector<LayerCacheSpec>(static_cast<size_t>(config.n_layer), {.kind = LayerCacheSpec::full,
                                                                           .n_head_kv = config.n_head_kv,
                                                                           .head_dim = config.head_dim,
                                                                           .value_dim = config.head_dim});
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& [k, v] : architectures()) out.push_back(k);
  return out;
}

std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& options) {
  io::ModelConfig config;
  const Architecture& a = architecture_of(dir, config);
  return a.load(dir, config, options);
}

ModelShape describe_model(const std::string& dir) {
  io::ModelConfig config;
  const Architecture& a = architecture_of(dir, config);
  return a.shape(config);
}

std::optional<ModelShape> describe_config(const io::ModelConfig& config) {
  const Architecture* a = find_architecture(config);
  if (!a) return std::nullopt;
  return a->shape(config);
}

}  // namespace tern
