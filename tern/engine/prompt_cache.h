// Who may continue from a prompt-cache file: a cheap fingerprint of a model directory (config.json
// and the safetensors headers: tensor names, shapes, dtypes and offsets; never the weights) and the
// hash of its tokenizer.json.
#pragma once
#include <string>

#include "tern/state/cache_file.h"

namespace tern {

// The identity of the model in dir; tokenizer is empty when dir has no tokenizer.json. Throws
// "[prompt-cache] ..." when config.json or a safetensors header cannot be read.
CacheFileIdentity prompt_cache_identity(const std::string& dir);

}  // namespace tern
