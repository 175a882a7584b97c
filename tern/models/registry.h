// Model registry: maps config.json's model type to an architecture and loads it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tern/models/model.h"

namespace tern {

// Loads the model in dir. Throws "[model] <dir>: unsupported architecture 'x' (supported: ...)" for an
// unknown model type, and the io/ errors for malformed configs or weights.
std::unique_ptr<Model> load_model(const std::string& dir, const LoadOptions& options = {});

// model_type values load_model accepts.
std::vector<std::string> supported_model_types();

}  // namespace tern
