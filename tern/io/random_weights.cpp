// RandomWeights: random_weights.json parsing and counter-based generation on the thread pool.
#include "tern/io/random_weights.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "tern/base/file.h"
#include "tern/base/half.h"
#include "tern/base/parallel.h"
#include "tern/io/json_util.h"

namespace tern::io {
namespace {

using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Roughly N(0, 1) from one hash: the sum of four 16-bit uniforms (Irwin-Hall, variance 1/3) rescaled.
float unit_normal(uint64_t h) {
  float s = 0.0f;
  for (int k = 0; k < 4; ++k) s += (static_cast<float>((h >> (16 * k)) & 0xffff) + 0.5f) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

Dtype parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "BF16" || s == "bfloat16" || s == "torch.bfloat16") return Dtype::bf16;
  if (s == "F16" || s == "float16" || s == "torch.float16") return Dtype::f16;
  if (s == "F32" || s == "float32" || s == "torch.float32") return Dtype::f32;
  TERN_THROW("[weights] {}: tensor '{}' expected dtype BF16, F16 or F32, got '{}'", path, name, s);
}

template <typename T>
void fill(T* out, uint64_t n, uint64_t seed, const RandomFill& f) {
  parallel_for(static_cast<int64_t>(n), int64_t{1} << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = f.std == 0.0f ? f.mean : f.mean + f.std * unit_normal(splitmix64(seed + static_cast<uint64_t>(i)));
      out[i] = static_cast<T>(v);
    }
  });
}

}  // namespace

RandomFill default_random_fill(const std::string& name) {
  if (ends_with(name, "norm.weight") || ends_with(name, "layer_scalar")) return {1.0f, 0.0f};
  if (ends_with(name, "A_log")) return {0.0f, 0.0f};
  if (ends_with(name, "dt_bias")) return {1.0f, 0.0f};
  if (ends_with(name, ".bias") || ends_with(name, "_bias")) return {0.0f, 0.0f};
  return {};
}

std::shared_ptr<RandomWeights> RandomWeights::open(const std::string& path) {
  return parse(read_file(path, "weights"), path);
}

std::shared_ptr<RandomWeights> RandomWeights::parse(const std::string& text, const std::string& path) {
  const json j = parse_json_text(text, path, "weights");
  TERN_CHECK(j.is_array(), "[weights] {}: expected a list of {{name, shape, dtype}} objects, got {}", path,
             json_brief(j));
  auto rw = std::make_shared<RandomWeights>();
  rw->path_ = path;
  std::map<std::string, std::pair<SafetensorsEntry, RandomFill>> sorted;
  for (const json& t : j) {
    TERN_CHECK(t.is_object(), "[weights] {}: expected each tensor to be an object, got {}", path, json_brief(t));
    const JsonReader r(t, path, "", "weights");
    const auto name = r.opt_string("name");
    TERN_CHECK(name && !name->empty(), "[weights] {}: expected a non-empty 'name', got {}", path, json_brief(t));
    SafetensorsEntry e;
    e.name = *name;
    e.dtype = parse_dtype(r.opt_string("dtype").value_or("BF16"), path, e.name);
    const json* shape = r.find("shape");
    TERN_CHECK(shape && shape->is_array(), "[weights] {}: tensor '{}' expected a 'shape' list, got {}", path, e.name,
               shape ? json_brief(*shape) : "none");
    for (const json& d : *shape) {
      TERN_CHECK(d.is_number_integer() && !(d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX) &&
                     d.get<int64_t>() >= 0,
                 "[weights] {}: tensor '{}' expected non-negative integer dimensions, got {}", path, e.name,
                 json_brief(*shape));
      e.shape.push_back(d.get<int64_t>());
    }
    TERN_CHECK(checked_tensor_bytes(e.shape, e.dtype).has_value(),
               "[weights] {}: tensor '{}' expected a shape whose size fits in 64 bits, got {}", path, e.name,
               json_brief(*shape));
    RandomFill f = default_random_fill(e.name);
    const JsonReader fill(t, path, e.name + ".", "weights");  // errors name the tensor: 'NAME.mean'
    f.mean = static_cast<float>(fill.opt_float("mean").value_or(f.mean));
    f.std = static_cast<float>(fill.opt_float("std").value_or(f.std));
    TERN_CHECK(f.std >= 0.0f, "[weights] {}: tensor '{}' expected std >= 0, got {}", path, e.name, f.std);
    TERN_CHECK(sorted.count(e.name) == 0, "[weights] {}: tensor '{}' listed twice", path, e.name);
    const std::string key = e.name;
    sorted.emplace(key, std::make_pair(std::move(e), f));
  }
  TERN_CHECK(!sorted.empty(), "[weights] {}: expected at least one tensor, got none", path);
  uint64_t offset = 0;
  for (auto& [name, ef] : sorted) {
    SafetensorsEntry& e = ef.first;
    e.begin = offset;
    TERN_CHECK(!__builtin_add_overflow(offset, *checked_tensor_bytes(e.shape, e.dtype), &e.end),
               "[weights] {}: expected the tensors' total size to fit in 64 bits, past it at '{}'", path, name);
    offset = e.end;
    rw->index_[name] = rw->tensors_.size();
    rw->tensors_.push_back(std::move(e));
    rw->fills_.push_back(ef.second);
  }
  return rw;
}

const SafetensorsEntry& RandomWeights::entry(const std::string& name) const {
  auto it = index_.find(name);
  TERN_CHECK(it != index_.end(), "[weights] {}: missing tensor '{}'", path_, name);
  return tensors_[it->second];
}

Tensor RandomWeights::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const RandomFill& f = fills_[index_.at(name)];
  Tensor t = Tensor::empty(e.shape, e.dtype);
  const uint64_t n = static_cast<uint64_t>(numel(e.shape));
  const uint64_t seed = fnv1a(name);
  switch (e.dtype) {
    case Dtype::bf16: fill(t.data<bf16>(), n, seed, f); break;
    case Dtype::f16: fill(t.data<f16>(), n, seed, f); break;
    default: fill(t.data<float>(), n, seed, f); break;
  }
  return t;
}

uint64_t RandomWeights::total_bytes() const { return tensors_.empty() ? 0 : tensors_.back().end; }

}  // namespace tern::io
