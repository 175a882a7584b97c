// WeightStore: single-file and sharded (index.json) checkpoints, and random weights without one.
#include "tern/io/weights.h"

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tern/base/file.h"
#include "tern/base/log.h"
#include "tern/base/timer.h"
#include "tern/io/json_util.h"

namespace tern::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

json read_index(const std::string& path) { return parse_json_text(read_file(path, "weights"), path, "weights"); }

}  // namespace

struct WeightStore::Progress {
  std::mutex mu;
  Timer clock;
  double interval = 5.0, next = 5.0;  // seconds
  uint64_t bytes = 0;
};

WeightStore WeightStore::open(const std::string& model_dir) {
  std::error_code ec;
  TERN_CHECK(fs::is_directory(model_dir, ec), "[weights] {}: expected a model directory, got {}", model_dir,
             fs::exists(model_dir, ec) ? "a file" : "nothing at that path");
  WeightStore ws;
  ws.dir_ = model_dir;
  ws.progress_ = std::make_shared<Progress>();
  const fs::path dir(model_dir);
  const std::string index_path = (dir / kIndexName).string();
  const std::string single_path = (dir / kSingleName).string();

  if (fs::exists(index_path, ec)) {
    json index = read_index(index_path);
    TERN_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
               "[weights] {}: expected an object with a 'weight_map' object", index_path);
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      TERN_CHECK(shard.is_string(), "[weights] {}: tensor '{}' expected a shard file name, got {}", index_path, name,
                 json_brief(shard));
      const std::string& file = shard.get_ref<const std::string&>();
      TERN_CHECK(!file.empty() && fs::path(file).filename() == fs::path(file),
                 "[weights] {}: tensor '{}' expected a shard file name inside the model directory, got '{}'",
                 index_path, name, file);
      auto it = shards.find(file);
      if (it == shards.end()) {
        const std::string shard_path = (dir / file).string();
        TERN_CHECK(fs::is_regular_file(shard_path, ec), "[weights] {}: expected shard '{}' listed for tensor '{}' to exist",
                   index_path, file, name);
        it = shards.emplace(file, SafetensorsFile::open(shard_path)).first;
      }
      ws.where_[name] = Location{it->second};
    }
    TERN_CHECK(!ws.where_.empty(), "[weights] {}: expected at least one tensor in weight_map, got none", index_path);
    return ws;
  }

  const std::string random_path = (dir / kRandomWeightsName).string();
  if (!fs::exists(single_path, ec) && fs::exists(random_path, ec)) {
    ws.random_ = RandomWeights::open(random_path);
    for (const auto& e : ws.random_->tensors()) ws.where_[e.name] = Location{};
    log_info("[weights] {}: random weights (no checkpoint): {} tensors", model_dir, ws.where_.size());
    return ws;
  }
  TERN_CHECK(fs::exists(single_path, ec), "[weights] {}: expected {} or {} (or {}), got none", model_dir, kSingleName,
             kIndexName, kRandomWeightsName);
  auto file = SafetensorsFile::open(single_path);
  for (const auto& e : file->tensors()) ws.where_[e.name] = Location{file};
  return ws;
}

bool WeightStore::has(const std::string& name) const { return where_.count(name) != 0; }

const WeightStore::Location& WeightStore::locate(const std::string& name) const {
  auto it = where_.find(name);
  TERN_CHECK(it != where_.end(), "[weights] {}: missing tensor '{}'", dir_, name);
  const Location& loc = it->second;
  if (!loc.file) return loc;
  TERN_CHECK(loc.file->has(name), "[weights] {}: missing tensor '{}' listed in {}", loc.file->path(), name,
             kIndexName);
  return loc;
}

const SafetensorsEntry& WeightStore::entry(const std::string& name) const {
  const Location& loc = locate(name);
  return loc.file ? loc.file->entry(name) : random_->entry(name);
}

const std::string& WeightStore::file_of(const std::string& name) const {
  const Location& loc = locate(name);
  return loc.file ? loc.file->path() : random_->path();
}

void WeightStore::set_progress_interval(double seconds) const {
  std::lock_guard<std::mutex> lock(progress_->mu);
  progress_->interval = seconds;
  progress_->next = progress_->clock.seconds() + seconds;
}

Tensor WeightStore::get(const std::string& name) const {
  const Location& loc = locate(name);
  {
    Progress& p = *progress_;
    std::lock_guard<std::mutex> lock(p.mu);
    p.bytes += (loc.file ? loc.file->entry(name) : random_->entry(name)).nbytes();
    const double t = p.clock.seconds();
    if (t >= p.next) {
      log_info("[weights] {}: {:.2f} of {:.2f} GB read after {:.0f} s", dir_, p.bytes / 1e9, total_bytes() / 1e9, t);
      p.next = t + p.interval;
    }
  }
  return loc.file ? loc.file->get(name) : random_->get(name);
}

Tensor WeightStore::get(const std::string& name, const Shape& expected) const {
  const SafetensorsEntry& e = entry(name);
  TERN_CHECK(e.shape == expected, "[weights] {}: tensor '{}' expected shape {}, got {}", file_of(name), name,
             shape_str(expected), shape_str(e.shape));
  return get(name);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, loc] : where_) out.push_back(name);
  return out;
}

uint64_t WeightStore::total_bytes() const {
  uint64_t n = 0;
  if (random_) return random_->total_bytes();
  for (const auto& [name, loc] : where_) {
    if (loc.file->has(name)) n += loc.file->entry(name).nbytes();
  }
  return n;
}

std::string WeightStore::find_prefix(const std::vector<std::string>& candidates, const std::string& probe) const {
  std::string tried;
  for (const auto& p : candidates) {
    if (has(p + probe)) return p;
    tried += fmt::format("{}'{}{}'", tried.empty() ? "" : ", ", p, probe);
  }
  TERN_THROW("[weights] {}: expected one of the tensors {}, got none", dir_, tried.empty() ? "(no candidates)" : tried);
}

}  // namespace tern::io
