// Model registry: model type -> architecture loader.
#include "tern/models/registry.h"

#include <filesystem>
#include <map>

#include "tern/models/architectures.h"

namespace tern {
namespace {

using Loader = std::unique_ptr<Model> (*)(const std::string&, const io::ModelConfig&, const LoadOptions&);

const std::map<std::string, Loader>& loaders() {
  static const std::map<std::string, Loader> m = {
      {"qwen3", load_qwen3},
      {"qwen3_moe", load_qwen3_moe},
      {"qwen3_5", load_qwen3_5},
      {"qwen3_5_text", load_qwen3_5},
      {"qwen3_5_moe", load_qwen3_5_moe},
      {"qwen3_5_moe_text", load_qwen3_5_moe},
      {"llama", load_llama},
      {"mistral", load_llama},
      {"gemma4", load_gemma4},
      {"gemma4_text", load_gemma4},
  };
  return m;
}

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& [k, v] : loaders()) out.push_back(k);
  return out;
}

std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& options) {
  TERN_CHECK(std::filesystem::is_directory(dir), "[model] expected a model directory, got '{}' (no such directory)", dir);
  io::ModelConfig config = io::load_model_config(dir);
  const std::string& type = config.text_model_type.empty() ? config.model_type : config.text_model_type;
  auto it = loaders().find(type);
  if (it == loaders().end()) it = loaders().find(config.model_type);
  if (it == loaders().end()) {
    std::string list;
    for (const auto& t : supported_model_types()) list += (list.empty() ? "" : ", ") + t;
    TERN_THROW("[model] {}: unsupported architecture '{}' (supported: {})", dir, type, list);
  }
  return it->second(dir, config, options);
}

}  // namespace tern
