// libFuzzer target: parse_safetensors_header on arbitrary bytes. Rejection must be a tern::Error;
// an accepted header must describe byte ranges that lie inside the buffer and do not overlap.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tern/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::io::SafetensorsHeader h;
  try {
    h = tern::io::parse_safetensors_header(data, size, "fuzz.safetensors");
  } catch (const tern::Error&) {
    return 0;
  }
  if (h.data_start + h.data_size != size) std::abort();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& e : h.tensors) {
    if (e.begin > e.end || e.end > h.data_size) std::abort();
    if (e.nbytes() != static_cast<uint64_t>(tern::numel(e.shape)) * tern::dtype_size(e.dtype)) std::abort();
    if (e.begin != e.end) ranges.emplace_back(e.begin, e.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) std::abort();
  }
  return 0;
}
