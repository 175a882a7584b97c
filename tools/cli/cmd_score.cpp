// tern score: teacher-forced NLL and perplexity of a token sequence, optionally through the cache in chunks.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tern/base/file.h"
#include "tern/io/safetensors.h"
#include "tern/train/perplexity.h"
#include "tools/cli/model_args.h"

namespace tern::cli {
namespace {

int run_score(int argc, char** argv) {
  Args a("score", "Score tokens with a teacher-forced forward; prints {n_tokens, nll, perplexity} as JSON.");
  a.positional("MODEL_DIR", "a Hugging Face model directory")
      .flag("ids", "1,2,3", "the tokens to score")
      .flag("text-file", "FILE", "a UTF-8 text file to tokenize and score")
      .flag("max-tokens", "N", "score only the first N tokens")
      .flag("chunk", "N",
            "feed the tokens N at a time through the generation cache (0 = one forward; auto = one forward while its "
            "logits take at most 1 GiB, else chunks whose logits do)",
            "auto")
      .flag("logits-out", "FILE", "write all logits as one f32 tensor 'logits' [n_tokens, vocab] to a safetensors file");
  add_runtime_flags(a);
  add_kv_cache_flags(a);
  if (!a.parse(argc, argv)) return 0;
  TERN_CHECK(a.has("ids") != a.has("text-file"), "[score] expected exactly one of --ids or --text-file");

  const KVCacheOptions kv = kv_cache_options(a);
  LoadedModel m = load_for_cli(a.get("MODEL_DIR"), runtime_options(a, kv));
  warn_unquantized_kv(m, "score", kv);
  std::vector<int32_t> ids;
  if (a.has("ids")) {
    ids = parse_ids(a.get("ids"));
  } else {
    ids = require_tokenizer(m, "score").encode(read_file(a.get("text-file"), "score"), true);
  }
  if (a.has("max-tokens")) {
    int64_t n = a.get_int("max-tokens");
    TERN_CHECK(n >= 2, "[score] expected --max-tokens >= 2, got {}", n);
    if (static_cast<int64_t>(ids.size()) > n) ids.resize(n);
  }
  // Predicting tokens 1..n-1 reads positions 0..n-2.
  warn_past_trained_context(m, "score", fmt::format("{} tokens", ids.size()), static_cast<int64_t>(ids.size()) - 1);
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t chunk =
      a.get("chunk") == "auto" ? score_chunk_within(n, m.model->vocab_size(), int64_t{1} << 30) : a.get_int("chunk");
  ScoreResult r = score_tokens(*m.model, ids, chunk, a.has("logits-out"), kv);
  if (a.has("logits-out")) io::save_safetensors(a.get("logits-out"), {{"logits", r.logits}});
  nlohmann::json out = {{"n_tokens", r.n_tokens}, {"nll", r.nll}, {"perplexity", r.perplexity},
                        {"seconds", r.seconds}};
  std::puts(out.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace tern::cli

TERN_COMMAND("score", "teacher-forced NLL / perplexity of tokens or a text file", tern::cli::run_score);
