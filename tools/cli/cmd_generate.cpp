// tern generate: stream a continuation of a prompt (text or token ids) from a model directory.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "tern/engine/generator.h"
#include "tern/engine/prompt_cache.h"
#include "tern/text/chat_template.h"
#include "tools/cli/model_args.h"

namespace tern::cli {
namespace {

SamplingParams sampling_from(const Args& a, const io::GenerationConfig& g) {
  SamplingParams p;
  // The checkpoint's generation_config decides greedy vs sampling unless the user sets a temperature.
  bool sample = g.do_sample.value_or(false);
  p.temperature = sample ? static_cast<float>(g.temperature.value_or(1.0)) : 0.0f;
  if (sample) {
    p.top_p = static_cast<float>(g.top_p.value_or(1.0));
    p.top_k = static_cast<int32_t>(g.top_k.value_or(0));
    p.min_p = static_cast<float>(g.min_p.value_or(0.0));
  }
  p.repetition_penalty = static_cast<float>(g.repetition_penalty.value_or(1.0));
  if (a.has("temperature")) p.temperature = a.get_float("temperature");
  if (a.has("top-p")) p.top_p = a.get_float("top-p");
  if (a.has("top-k")) p.top_k = static_cast<int32_t>(a.get_int("top-k", 0, std::numeric_limits<int32_t>::max()));
  if (a.has("min-p")) p.min_p = a.get_float("min-p");
  if (a.has("repetition-penalty")) p.repetition_penalty = a.get_float("repetition-penalty");
  if (a.has("presence-penalty")) p.presence_penalty = a.get_float("presence-penalty");
  if (a.has("frequency-penalty")) p.frequency_penalty = a.get_float("frequency-penalty");
  p.seed = static_cast<uint64_t>(a.get_int("seed", 0, std::numeric_limits<int64_t>::max()));
  return p;
}

int run_generate(int argc, char** argv) {
  Args a("generate", "Generate a continuation of PROMPT with the model in MODEL_DIR, streaming text to stdout.");
  a.positional("MODEL_DIR", "a Hugging Face model directory (config.json, *.safetensors, tokenizer.json)")
      .positional("PROMPT", "the prompt text (omit when --ids is given)", false)
      .flag("ids", "1,2,3", "prompt as comma-separated token ids instead of text")
      .flag("max-tokens", "N", "most tokens to generate", "128")
      .flag("temperature", "T", "sampling temperature; 0 = greedy (default: generation_config.json, else greedy)")
      .flag("top-p", "P", "nucleus sampling mass in (0, 1]")
      .flag("top-k", "K", "sample among the K most likely tokens (0 = off)")
      .flag("min-p", "P", "drop tokens below P times the top probability (0 = off)")
      .flag("repetition-penalty", "R", "divide positive / multiply negative logits of seen tokens by R (1 = off)")
      .flag("presence-penalty", "X", "subtract X from logits of tokens already seen")
      .flag("frequency-penalty", "X", "subtract X times the count of each seen token")
      .flag("seed", "S", "random seed: same seed and inputs give the same tokens", "0")
      .flag("prefill-chunk", "N", "feed the prompt N tokens a forward, bounding prefill memory (0 = all at once)",
            std::to_string(kDefaultPrefillTokens))
      .flag("chat", "", "wrap PROMPT as a user message in the model's chat template (with the generation prompt)")
      .flag("json", "", "print one JSON object at the end (ids, text, timings) instead of streaming")
      .flag("prompt-cache", "FILE",
            "continue from a prompt-cache file: the prompt must start with its tokens, only the rest is prefilled "
            "(same model, tokenizer and --kv-* flags, else one error)")
      .flag("prompt-cache-save", "FILE",
            "save the caches to FILE once the prompt is prefilled (before the first generated token); "
            "--max-tokens 0 only saves")
      .flag("cuda-graphs", "on|off", "CUDA: capture the decode step as a graph and replay it (compiled decode)", "on");
  add_runtime_flags(a);
  add_kv_cache_flags(a);
  if (!a.parse(argc, argv)) return 0;
  TERN_CHECK(a.has("ids") != a.has("PROMPT"), "[generate] expected exactly one of PROMPT or --ids");

  const KVCacheOptions kv = kv_cache_options(a);
  LoadedModel m = load_for_cli(a.get("MODEL_DIR"), runtime_options(a, kv));
  warn_unquantized_kv(m, "generate", kv);
  std::vector<int32_t> prompt;
  if (a.has("ids")) {
    prompt = parse_ids(a.get("ids"));
  } else if (a.has("chat")) {
    // As transformers' apply_chat_template(tokenize=True): the template places the special tokens.
    nlohmann::ordered_json request = {{"messages", {{{"role", "user"}, {"content", a.get("PROMPT")}}}},
                                      {"add_generation_prompt", true}};
    prompt = require_tokenizer(m, "generate").encode(text::apply_chat_template(m.dir, request), false);
  } else {
    prompt = require_tokenizer(m, "generate").encode(a.get("PROMPT"), true);
  }
  GenerateOptions opt;
  opt.max_tokens = a.get_int("max-tokens");
  // The positions the model reads: the prompt's and every new token's but the last.
  warn_past_trained_context(m, "generate", fmt::format("{} prompt tokens and up to {} new ones", prompt.size(), opt.max_tokens),
                            static_cast<int64_t>(prompt.size()) + std::max<int64_t>(opt.max_tokens - 1, 0));
  opt.sampling = sampling_from(a, m.generation);
  opt.stop_ids = m.generation.eos_token_ids;
  opt.prefill_chunk = a.get_int("prefill-chunk");
  TERN_CHECK(opt.prefill_chunk >= 0, "[generate] expected --prefill-chunk >= 0, got {}", opt.prefill_chunk);
  opt.kv = kv;
  TERN_CHECK(a.get("cuda-graphs") == "on" || a.get("cuda-graphs") == "off",
             "[generate] expected --cuda-graphs on or off, got '{}'", a.get("cuda-graphs"));
  opt.compiled_decode = a.get("cuda-graphs") == "on";
  if (a.has("prompt-cache")) opt.prompt_cache_load = a.get("prompt-cache");
  if (a.has("prompt-cache-save")) opt.prompt_cache_save = a.get("prompt-cache-save");
  if (a.has("prompt-cache") || a.has("prompt-cache-save")) opt.prompt_cache_identity = prompt_cache_identity(m.dir);
  const bool json = a.has("json");

  std::optional<text::StreamDecoder> stream;
  if (m.tokenizer && !json) stream.emplace(*m.tokenizer, true);
  auto on_token = [&](int32_t id) {
    if (json) return true;
    std::string piece = stream ? stream->push(id) : std::to_string(id) + " ";
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  GenerateResult r = generate(*m.model, prompt, opt, on_token);
  if (!json) {
    std::string rest = stream ? stream->finish() : "";
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  nlohmann::json out;
  out["ids"] = r.ids;
  out["logprobs"] = r.logprobs;
  out["text"] = m.tokenizer ? m.tokenizer->decode(r.ids, true) : "";
  out["prompt_tokens"] = r.prompt_tokens;
  out["cached_tokens"] = r.cached_tokens;
  out["generated_tokens"] = r.ids.size();
  out["finish_reason"] = r.finish_reason;
  out["timings"] = {{"prefill_seconds", r.prefill_seconds},
                    {"decode_seconds", r.decode_seconds},
                    {"prompt_tokens_per_second", r.prefill_tokens_per_second()},
                    {"generation_tokens_per_second", r.decode_tokens_per_second()}};
  std::puts(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace
}  // namespace tern::cli

TERN_COMMAND("generate", "generate text from a prompt, streaming", tern::cli::run_generate);
