// RandomWeights: a checkpoint stand-in for benchmarks at real model sizes. random_weights.json lists
// every tensor ({name, shape, dtype}); values are a deterministic counter-based hash of (name, index).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tern/io/safetensors.h"

namespace tern::io {

// The file name WeightStore::open looks for when a directory holds no safetensors.
constexpr const char* kRandomWeightsName = "random_weights.json";

// How one tensor is filled: mean + std * z, z roughly N(0, 1).
struct RandomFill {
  float mean = 0.0f;
  float std = 0.02f;
};

// The fill a checkpoint name gets by default, chosen to keep a forward numerically sane: norm weights
// and layer_scalar 1, A_log 0 (decay rate 1), dt_bias 1, biases 0, everything else N(0, 0.02).
RandomFill default_random_fill(const std::string& name);

class RandomWeights {
 public:
  // Parses path: a JSON list of {"name", "shape": [..], "dtype": "BF16" | "F16" | "F32"} objects, each
  // optionally with "mean" and "std" overriding default_random_fill. A malformed file, duplicate name,
  // unknown dtype, negative dimension, a shape or a total size past 64 bits, or a mean or std that is
  // not finite throws tern::Error naming the path and the tensor.
  static std::shared_ptr<RandomWeights> open(const std::string& path);
  // The same for the file's text (path names it in errors).
  static std::shared_ptr<RandomWeights> parse(const std::string& text, const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor, sorted by name; begin/end are offsets as if the tensors were laid out back to back.
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // The entry of name; throws "[weights] <path>: missing tensor 'name'" when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // A fresh contiguous CPU tensor of name in its listed dtype, generated on tern's thread pool. Throws
  // like entry() when absent.
  Tensor get(const std::string& name) const;
  uint64_t total_bytes() const;

 private:
  std::string path_;
  std::vector<SafetensorsEntry> tensors_;
  std::vector<RandomFill> fills_;        // parallel to tensors_
  std::map<std::string, size_t> index_;  // name -> position in tensors_
};

}  // namespace tern::io
