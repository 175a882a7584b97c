// tern info: what a model directory holds and what it will take to run.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "tern/base/host_memory.h"
#include "tern/io/model_config.h"
#include "tern/io/weights.h"
#include "tern/models/cache_layout.h"
#include "tern/ops/device.h"
#include "tools/cli/model_args.h"

namespace tern::cli {
namespace {

// "80GB", "80GiB", "512MiB", "1e9": bytes (decimal units for GB/MB, binary for GiB/MiB). A decimal number
// (no hex, inf or nan, which std::stod would take) of at most 1 PiB.
double parse_memory(const std::string& s) {
  static const std::regex form(R"(([0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?)([KMGT]i?B|B)?)");
  std::smatch m;
  double v = 0;
  const bool ok = std::regex_match(s, m, form);
  if (ok) v = std::strtod(m[1].str().c_str(), nullptr);
  const std::string unit = ok ? m[4].str() : "";
  const std::map<std::string, double> units = {{"", 1},          {"B", 1},           {"KB", 1e3},  {"MB", 1e6},
                                               {"GB", 1e9},      {"TB", 1e12},       {"KiB", 1024.0}, {"MiB", 1048576.0},
                                               {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  TERN_CHECK(ok && v > 0 && units.count(unit), "[info] expected --memory like 80GB or 24GiB, got '{}'", s);
  const double bytes = v * units.at(unit);
  TERN_CHECK(bytes <= 0x1p50, "[info] expected --memory of at most 1 PiB, got '{}'", s);
  return bytes;
}

int run_info(int argc, char** argv) {
  Args a("info", "Describe a model directory: architecture, parameters, dtypes, memory needed.");
  a.positional("MODEL_DIR", "a Hugging Face model directory")
      .flag("context", "N", "context length for the KV-cache estimate (default: max_position_embeddings)")
      .flag("memory", "SIZE|device",
            "memory (e.g. 80GB, 24GiB; device = what the device has free now: the GPU's free memory, or the "
            "host's MemAvailable with --device cpu): report the context that fits beside the weights")
      .flag("json", "", "print JSON instead of text");
  add_runtime_flags(a);
  add_kv_cache_flags(a);
  if (!a.parse(argc, argv)) return 0;
  const std::string dir = a.get("MODEL_DIR");
  const KVCacheOptions kv = kv_cache_options(a);
  LoadOptions opt = runtime_options(a);
  io::ModelConfig c = io::load_model_config(dir);
  io::WeightStore store = io::WeightStore::open(dir);
  int64_t params = 0;
  std::map<std::string, int64_t> by_dtype;
  for (const auto& n : store.names()) {
    if (c.tie_word_embeddings && n.find("lm_head.weight") != std::string::npos) continue;  // the embedding, again
    const auto& e = store.entry(n);
    params += numel(e.shape);
    by_dtype[dtype_name(e.dtype)] += numel(e.shape);
  }
  // At most 2^40 tokens: their cache bytes stay far inside 64 bits.
  const int64_t ctx =
      a.has("context") ? a.get_int("context", 1, int64_t{1} << 40) : std::max<int64_t>(c.max_position_embeddings, 1);
  const int64_t kv_elem = opt.device.is_cpu() ? 4 : 2;
  // What each layer's cache holds and the routed experts, from the config alone: no weights are read (a
  // checkpoint's experts can be tens of GB). An architecture tern does not run: full layers, no experts.
  const std::optional<ModelShape> described = describe_config(c);
  const bool supported = described.has_value();
  const ModelShape shape = described.value_or(ModelShape{default_cache_layout(c), {}});
  const std::vector<LayerCacheSpec>& layout = shape.layout;
  const RoutedExperts& experts = shape.experts;
  const int64_t kv_per_token = cache_bytes_per_token(layout, kv, kv_elem);
  const CacheBytes at_ctx = cache_bytes(layout, kv, ctx, kv_elem);
  std::map<std::string, int64_t> layer_kinds;
  for (const auto& l : layout)
    ++layer_kinds[l.kind == LayerCacheSpec::full      ? "full"
                  : l.kind == LayerCacheSpec::sliding ? "sliding"
                  : l.kind == LayerCacheSpec::shared  ? "shared"
                                                      : "recurrent"];
  // Matrices stay bf16 on the CPU (they widen exactly per block); norms and biases are widened to f32.
  const int64_t weight_bytes = opt.device.is_cpu() ? static_cast<int64_t>(store.total_bytes())
                                                   : params * static_cast<int64_t>(dtype_size(opt.dtype));
  nlohmann::json out = {{"architecture", c.architecture},
                        {"model_type", c.text_model_type.empty() ? c.model_type : c.text_model_type},
                        {"parameters", params},
                        {"active_parameters", params - experts.idle_params()},
                        {"checkpoint_bytes", store.total_bytes()},
                        {"layers", c.n_layer},
                        {"hidden_size", c.hidden_size},
                        {"heads", c.n_head},
                        {"kv_heads", c.n_head_kv},
                        {"head_dim", c.head_dim},
                        {"vocab_size", c.vocab_size},
                        {"rope", c.rope.type},
                        {"rope_theta", c.rope.theta},
                        {"tied_embeddings", c.tie_word_embeddings},
                        {"checkpoint_dtypes", by_dtype},
                        {"device", opt.device.is_cpu() ? "cpu" : cuda_device_name()},
                        {"compute_dtype", dtype_name(opt.dtype)},
                        {"weight_bytes_loaded", weight_bytes},
                        {"kv_bytes_per_token", kv_per_token},
                        {"context", ctx},
                        {"kv_bytes_at_context", at_ctx.total()},
                        {"kv_bytes_at_context_by_kind",
                         {{"full", at_ctx.full}, {"sliding", at_ctx.sliding}, {"recurrent", at_ctx.recurrent}}},
                        {"cache_layers", layer_kinds},
                        {"kv_layout_known", supported},
                        {"total_bytes_at_context", weight_bytes + at_ctx.total()},
                        {"kv_cache", kv.kind}};
  int64_t fits = -1;
  double mem = 0;
  std::string mem_source, mem_label;  // where the memory came from; how the text line names it
  if (a.has("memory")) {
    if (a.get("memory") == "device") {
      const bool cpu = opt.device.is_cpu();
      mem = static_cast<double>(cpu ? host_available_memory() : cuda_free_memory());
      mem_source = cpu ? "host MemAvailable" : "cuda free memory";
      mem_label = fmt::format("{} ({})", human_bytes(mem), mem_source);
    } else {
      mem = parse_memory(a.get("memory"));
      mem_source = "--memory";
      mem_label = a.get("memory");
    }
    fits = mem > weight_bytes ? context_that_fits(layout, kv, kv_elem, mem - weight_bytes) : 0;
    out["memory_bytes"] = mem;
    out["memory_source"] = mem_source;
    out["context_that_fits"] = fits;
  }
  if (a.has("json")) {
    std::puts(out.dump().c_str());
    return 0;
  }
  std::printf("model        %s (%s)\n", dir.c_str(), c.architecture.c_str());
  std::printf("type         %s, %lld layers, hidden %lld, %lld heads / %lld kv heads, head_dim %lld, vocab %lld\n",
              out["model_type"].get<std::string>().c_str(), (long long)c.n_layer, (long long)c.hidden_size,
              (long long)c.n_head, (long long)c.n_head_kv, (long long)c.head_dim, (long long)c.vocab_size);
  std::printf("rope         %s, theta %g%s\n", c.rope.type.c_str(), c.rope.theta,
              c.tie_word_embeddings ? ", tied embeddings" : "");
  std::string dts;
  for (const auto& [k, v] : by_dtype) dts += fmt::format("{}{} {}", dts.empty() ? "" : ", ", k, v);
  std::printf("parameters   %lld (%s; checkpoint %s)\n", (long long)params, dts.c_str(),
              human_bytes(static_cast<double>(store.total_bytes())).c_str());
  if (experts.layers > 0) {
    std::printf("experts      a token takes %lld of %lld routed experts in each of %lld MoE layers: %lld active parameters\n",
                (long long)experts.per_token, (long long)experts.per_layer, (long long)experts.layers,
                (long long)(params - experts.idle_params()));
  }
  std::printf("device       %s, compute dtype %s\n", out["device"].get<std::string>().c_str(), dtype_name(opt.dtype));
  std::printf("memory       weights %s + caches %s at %lld tokens = %s\n",
              human_bytes(static_cast<double>(weight_bytes)).c_str(), human_bytes(static_cast<double>(at_ctx.total())).c_str(),
              (long long)ctx, human_bytes(static_cast<double>(weight_bytes + at_ctx.total())).c_str());
  std::string kinds;
  for (const auto& [k, n] : layer_kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
  std::printf("kv cache     %s: %lld bytes per token on full layers; %s at %lld tokens: full %s, sliding %s, recurrent %s "
              "(layers: %s%s)\n",
              kv.kind.c_str(), (long long)kv_per_token, human_bytes(static_cast<double>(at_ctx.total())).c_str(),
              (long long)ctx, human_bytes(static_cast<double>(at_ctx.full)).c_str(),
              human_bytes(static_cast<double>(at_ctx.sliding)).c_str(),
              human_bytes(static_cast<double>(at_ctx.recurrent)).c_str(), kinds.c_str(),
              supported ? "" : "; architecture not supported, all assumed full attention");
  if (fits >= 0) {
    std::string note;
    if (static_cast<double>(weight_bytes) >= mem) {
      note = fmt::format(" (the weights alone take {})", human_bytes(static_cast<double>(weight_bytes)));
    } else if (c.max_position_embeddings > 0 && fits > c.max_position_embeddings) {
      note = fmt::format(" (more than the model's {} positions)", c.max_position_embeddings);
    }
    std::printf("fits         %lld tokens of context in %s beside the weights%s\n", (long long)fits, mem_label.c_str(),
                note.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tern::cli

TERN_COMMAND("info", "architecture, parameters, dtypes and memory of a model", tern::cli::run_info);
