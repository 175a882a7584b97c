// Shared model-command plumbing.
#include "tools/cli/model_args.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tern/base/log.h"
#include "tern/base/parallel.h"
#include "tern/ops/device.h"

namespace tern::cli {

void add_runtime_flags(Args& args) {
  args.flag("device", "DEV", "cpu, cuda or auto (cuda when a GPU is present)", "auto");
  args.flag("threads", "N", "CPU threads for tern's own loops (default: all cores)");
}

LoadOptions runtime_options(const Args& args) {
  if (args.has("threads")) {
    int64_t n = args.get_int("threads");
    TERN_CHECK(n > 0 && n <= 1024, "[cli] expected --threads in [1, 1024], got {}", n);
    set_num_threads(static_cast<int>(n));
  }
  LoadOptions o;
  std::string dev = args.get("device");
  TERN_CHECK(dev == "cpu" || dev == "cuda" || dev == "auto", "[cli] expected --device cpu, cuda or auto, got '{}'", dev);
  bool cuda = dev == "cuda" || (dev == "auto" && cuda_available());
  if (dev == "cuda")
    TERN_CHECK(cuda_available(), "[cli] --device cuda: no usable CUDA device ({})", cuda_status());
  if (cuda) {
    cuda_init();
    o.device = Device::cuda(0);
    o.dtype = Dtype::bf16;
  }
  return o;
}

LoadOptions runtime_options(const Args& args, const KVCacheOptions& kv) {
  LoadOptions o = runtime_options(args);
  kv.validate();
  return o;
}

void add_kv_cache_flags(Args& args) {
  args.flag("kv-cache", "KIND",
            "KV storage: bf16 (plain), affine8, affine4, turbo (= turbo:k8v3) or turbo:k<8|4|3>v<2|3|4|8>", "bf16")
      .flag("kv-group", "G", "affine group size along head_dim: 32, 64 or 128", "64")
      .flag("kv-start", "S", "stay unquantized until the cache holds S positions (bf16-first)", "0")
      .flag("kv-boundary", "N", "keep the first and last N attention layers unquantized", "0");
}

KVCacheOptions kv_cache_options(const Args& args) {
  KVCacheOptions o;
  o.kind = args.get("kv-cache");
  o.group = args.get_int("kv-group");
  o.start = args.get_int("kv-start");
  o.boundary = args.get_int("kv-boundary");
  o.validate();
  return o;
}

LoadedModel load_for_cli(const std::string& dir, const LoadOptions& options) {
  TERN_CHECK(std::filesystem::is_directory(dir), "[cli] expected a model directory, got '{}' (no such directory)", dir);
  LoadedModel m;
  m.dir = dir;
  m.model = load_model(dir, options);
  if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) m.tokenizer = text::Tokenizer::load(dir);
  m.generation = io::load_generation_config(dir, m.model->config());
  return m;
}

const text::Tokenizer& require_tokenizer(const LoadedModel& m, const char* what) {
  TERN_CHECK(m.tokenizer.has_value(), "[{}] {} has no tokenizer.json; pass token ids with --ids", what, m.dir);
  return *m.tokenizer;
}

std::string json_escape(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) { b /= 1024; ++u; }
  return fmt::format("{:.2f} {}", b, units[u]);
}

void warn_past_trained_context(const LoadedModel& m, const char* command, const std::string& reads, int64_t positions) {
  const int64_t trained = m.model->config().max_position_embeddings;
  if (trained > 0 && positions > trained) {
    log_warn("[{}] {} take {} positions, past the model's max_position_embeddings of {}: it was not trained on "
             "positions that far",
             command, reads, positions, trained);
  }
}

void warn_unquantized_kv(const LoadedModel& m, const char* command, const KVCacheOptions& kv) {
  KVCacheOptions plain = kv;
  plain.kind = "bf16";
  if (kv.kind == plain.kind) return;
  const std::vector<LayerCacheSpec> layout = m.model->cache_layout();
  const int64_t context = 1 << 16;  // past every sliding window, so that ring layers count too
  if (cache_bytes(layout, kv, context, 2).total() != cache_bytes(layout, plain, context, 2).total()) return;
  const auto full = std::count_if(layout.begin(), layout.end(),
                                  [](const LayerCacheSpec& l) { return l.kind == LayerCacheSpec::full; });
  const std::string why = kv.boundary > 0 ? fmt::format("--kv-boundary {} keeps the first and last {} attention "
                                                        "layers unquantized, and the model's caches have {} "
                                                        "full-attention layers",
                                                        kv.boundary, kv.boundary, full)
                                          : "the model's caches have no full-attention layer";
  log_warn("[{}] --kv-cache {} stores no layer quantized: {} (sliding ones take only affine storage)", command, kv.kind,
           why);
}

}  // namespace tern::cli
