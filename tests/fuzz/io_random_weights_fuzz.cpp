// libFuzzer target: RandomWeights::parse on arbitrary text (random_weights.json, the stand-in
// checkpoint of the benchmarks). Rejection must be a tern::Error; an accepted list must be usable:
// tensors sorted by unique name, laid out back to back with the bytes of their shapes, and a small
// tensor generated with its listed shape and dtype.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tern/io/random_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<tern::io::RandomWeights> rw;
  try {
    rw = tern::io::RandomWeights::parse(text, "fuzz/random_weights.json");
  } catch (const tern::Error&) {
    return 0;
  }
  const auto& ts = rw->tensors();
  if (ts.empty()) std::abort();
  uint64_t offset = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const tern::io::SafetensorsEntry& e = ts[i];
    if (i > 0 && !(ts[i - 1].name < e.name)) std::abort();
    const std::optional<uint64_t> bytes = tern::io::checked_tensor_bytes(e.shape, e.dtype);
    if (!bytes || e.begin != offset || e.end - e.begin != *bytes) std::abort();
    offset = e.end;
    if (!rw->has(e.name) || &rw->entry(e.name) != &e) std::abort();
    if (*bytes <= 4096) {
      const tern::Tensor t = rw->get(e.name);
      if (t.shape() != e.shape || t.dtype() != e.dtype || t.nbytes() != *bytes) std::abort();
    }
  }
  if (rw->total_bytes() != offset) std::abort();
  return 0;
}
