// libFuzzer target: parse_model_config on arbitrary JSON (inputs that are not JSON are skipped: the
// JSON parser is not under test). Rejection must be a tern::Error; an accepted config must be usable:
// its sizes positive and its layer types one per layer.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "tern/io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  nlohmann::json j = nlohmann::json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size,
                                           nullptr, false);
  if (j.is_discarded()) return 0;
  tern::io::ModelConfig c;
  try {
    c = tern::io::parse_model_config(j, "fuzz/config.json");
  } catch (const tern::Error&) {
    return 0;
  }
  if (c.hidden_size <= 0 || c.n_layer <= 0 || c.vocab_size <= 0) std::abort();
  if (c.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0) std::abort();
  if (static_cast<int64_t>(c.layer_types.size()) != c.n_layer) std::abort();
  return 0;
}
