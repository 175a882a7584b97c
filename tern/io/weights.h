// WeightStore: the tensors of a model directory, from model.safetensors, from the shards listed by
// model.safetensors.index.json, or generated from random_weights.json, looked up by Hugging Face name.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tern/io/random_weights.h"
#include "tern/io/safetensors.h"

namespace tern::io {

class WeightStore {
 public:
  // Opens model_dir: model.safetensors.index.json when present (every shard its weight_map names must
  // exist and parse), else model.safetensors, else random_weights.json (no checkpoint: every tensor is
  // generated on get(), see RandomWeights; logged as one info line). A missing directory, none of the
  // three, or a malformed index or file throws tern::Error naming the path.
  static WeightStore open(const std::string& model_dir);

  const std::string& dir() const { return dir_; }
  // True when name is listed (in the index for a sharded store, in the file otherwise).
  bool has(const std::string& name) const;
  // A CPU view of name borrowing the mapping (see SafetensorsFile::get); for random weights a fresh
  // tensor. Throws
  // "[weights] <dir>: missing tensor 'name'" when unlisted, and "[weights] <shard>: missing tensor
  // 'name' listed in model.safetensors.index.json" when the index points at a shard without it.
  // A load that takes longer than the progress interval (5 s) logs "[weights] DIR: X of Y GB read after
  // N s" once an interval as get() hands tensors out (their bytes counted when handed out, as their
  // caller reads them next).
  Tensor get(const std::string& name) const;
  // The progress lines' interval in seconds (tests use 0: a line every get()).
  void set_progress_interval(double seconds) const;
  // get(name) that also throws "[weights] <file>: tensor 'name' expected shape [..], got [..]" when
  // the stored shape differs from expected.
  Tensor get(const std::string& name, const Shape& expected) const;
  // The header entry of name (dtype, shape, byte range) without touching its bytes; throws like get.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The safetensors file that holds name (random_weights.json for random weights); throws like get.
  const std::string& file_of(const std::string& name) const;
  // Every listed tensor name, sorted.
  std::vector<std::string> names() const;
  // True when the tensors come from random_weights.json rather than a checkpoint.
  bool is_random() const { return random_ != nullptr; }
  // Sum of the byte sizes of every listed tensor.
  uint64_t total_bytes() const;
  // The first p in candidates such that p + probe is a listed tensor (e.g. "model." or
  // "model.language_model." for probe "embed_tokens.weight"); throws tern::Error listing the names
  // tried when none matches.
  std::string find_prefix(const std::vector<std::string>& candidates, const std::string& probe) const;

 private:
  struct Location {
    std::shared_ptr<SafetensorsFile> file;  // null for random weights
  };
  const Location& locate(const std::string& name) const;

  std::string dir_;
  std::map<std::string, Location> where_;  // tensor name -> the file that holds it
  std::shared_ptr<RandomWeights> random_;  // set when the directory has no checkpoint
  struct Progress;                          // get()'s byte count and clock, shared by copies of the store
  std::shared_ptr<Progress> progress_;
};

}  // namespace tern::io
