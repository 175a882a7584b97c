// One loader per architecture file (models/<arch>.cpp); the registry maps model types onto them.
#pragma once
#include <memory>
#include <string>

#include "tern/models/model.h"

namespace tern {

std::unique_ptr<Model> load_qwen3(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);
std::unique_ptr<Model> load_qwen3_moe(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);
std::unique_ptr<Model> load_gemma4(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);
std::unique_ptr<Model> load_qwen3_5(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);
std::unique_ptr<Model> load_qwen3_5_moe(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);
std::unique_ptr<Model> load_llama(const std::string& dir, const io::ModelConfig& config, const LoadOptions& options);

// What each architecture's config says without loading weights (describe_model); qwen3 and llama take
// default_cache_layout and no experts.
ModelShape shape_qwen3_moe(const io::ModelConfig& config);
ModelShape shape_gemma4(const io::ModelConfig& config);
ModelShape shape_qwen3_5(const io::ModelConfig& config);
ModelShape shape_qwen3_5_moe(const io::ModelConfig& config);

}  // namespace tern
