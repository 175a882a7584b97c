// libFuzzer target: parse_generation_config on arbitrary text (generation_config.json). Rejection must
// be a tern::Error; an accepted file must give what the CLI converts without overflow: finite sampling
// numbers within float range and a top_k that fits 32 bits.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "tern/io/generation_config.h"

namespace {

bool float_range(const std::optional<double>& v) {
  return !v || (std::isfinite(*v) && std::fabs(*v) <= std::numeric_limits<float>::max());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  tern::io::ModelConfig config;
  config.eos_token_ids = {7};
  tern::io::GenerationConfig g;
  try {
    g = tern::io::parse_generation_config(text, "fuzz/generation_config.json", config);
  } catch (const tern::Error&) {
    return 0;
  }
  if (!float_range(g.temperature) || !float_range(g.top_p) || !float_range(g.min_p) ||
      !float_range(g.repetition_penalty)) {
    std::abort();
  }
  if (g.top_k && (*g.top_k < std::numeric_limits<int32_t>::min() || *g.top_k > std::numeric_limits<int32_t>::max())) {
    std::abort();
  }
  return 0;
}
