// Flags and loading shared by the model commands (generate, score, info, bench): device and thread
// selection, loading a model directory with its tokenizer and generation config.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "tern/io/generation_config.h"
#include "tern/models/registry.h"
#include "tern/state/kv_cache_options.h"
#include "tern/text/tokenizer.h"
#include "tools/cli/command.h"

namespace tern::cli {

// Adds --device and --threads.
void add_runtime_flags(Args& args);
// Applies --threads and resolves --device (cpu | cuda | auto) into load options.
LoadOptions runtime_options(const Args& args);
// runtime_options, checking that the KV storage can live on the chosen device (commands that build caches).
LoadOptions runtime_options(const Args& args, const KVCacheOptions& kv);

struct LoadedModel {
  std::string dir;
  std::unique_ptr<Model> model;
  std::optional<text::Tokenizer> tokenizer;  // absent when the directory has no tokenizer.json
  io::GenerationConfig generation;
};

// Adds --kv-cache, --kv-group, --kv-start and --kv-boundary.
void add_kv_cache_flags(Args& args);
// The KV storage those flags name, validated (a bad value throws one "[kv-cache] ..." line).
KVCacheOptions kv_cache_options(const Args& args);

// Loads dir's model, its tokenizer.json when present, and generation_config.json.
LoadedModel load_for_cli(const std::string& dir, const LoadOptions& options);

// The tokenizer, or "[what] <dir> has no tokenizer.json; pass --ids" when absent.
const text::Tokenizer& require_tokenizer(const LoadedModel& m, const char* what);

// Warns once on stderr ("[command] READS take N positions, past the model's max_position_embeddings of
// M: ...") when a run reads more positions than the model was trained on; it still runs, as
// transformers does.
void warn_past_trained_context(const LoadedModel& m, const char* command, const std::string& reads, int64_t positions);

// Warns once on stderr ("[command] --kv-cache K stores no layer quantized: ...") when quantized storage
// was asked for but the model has no layer that takes it (--kv-boundary covers every attention layer,
// or TurboQuant on a model of sliding layers only); it still runs, unquantized.
void warn_unquantized_kv(const LoadedModel& m, const char* command, const KVCacheOptions& kv);

// JSON string escaping for one-line outputs.
std::string json_escape(const std::string& s);

// Bytes in binary units for text outputs: "1.50 GiB".
std::string human_bytes(double b);

}  // namespace tern::cli
