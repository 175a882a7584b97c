// Model registry: maps config.json's model type to an architecture and loads it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/models/model.h"

namespace tern {

// Loads the model in dir. Throws "[model] <dir>: unsupported architecture 'x' (supported: ...)" for an
// unknown model type, and the io/ errors for malformed configs or weights.
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& options = {});

// What dir's config says of the model without reading its weights: each layer's cache (as the loaded
// model's cache_layout() would say) and the routed experts. Throws as load_model does
// for a missing directory, an unknown architecture or a malformed config.
ModelShape describe_model(const std::string& dir);
// The same for a config already read; nullopt for an architecture load_model does not know.
std::optional<ModelShape> describe_config(const io::ModelConfig& config);

// model_type values load_model accepts.
std::vector<std::string> supported_model_types();

}  // namespace tern
