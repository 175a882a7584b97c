// The single-sequence generation loop: prefill (optionally in chunks), then sample and decode one
// token at a time through the model's caches until a stop id or the token budget.
#pragma once
#include <functional>
#include <vector>

#include "tern/engine/prefill.h"
#include "tern/models/model.h"
#include "tern/sample/sampler.h"
#include "tern/state/cache_file.h"

namespace tern {

struct GenerateOptions {
  int64_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these (it is kept in ids)
  int64_t prefill_chunk = kDefaultPrefillTokens;  // prompt tokens a forward (tern/engine/prefill.h); 0: all at once
  KVCacheOptions kv;              // the KV storage of the generation caches
  // CUDA: decode through a captured graph (tern/engine/compiled_decode.h) when the model and caches
  // allow it; greedy sampling without penalties or bias then picks tokens on the device.
  bool compiled_decode = true;
  // Prompt caches (tern/state/cache_file.h), checked against prompt_cache_identity. Load: the caches
  // start from that file's state, the prompt must start with its ids and only the rest is prefilled.
  // Save: the caches are written once the whole prompt is prefilled (before the first sampled token).
  std::string prompt_cache_load, prompt_cache_save;
  CacheFileIdentity prompt_cache_identity;
};

struct GenerateResult {
  std::vector<int32_t> ids;            // generated tokens (a stop id included)
  std::vector<float> logprobs;         // per generated token, under the raw logits
  std::string finish_reason;           // "stop" or "length"
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;           // prompt tokens restored from a prompt-cache file (not prefilled)
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Decode speed counts the tokens produced by decode steps (all but the first, which prefill yields).
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && ids.size() > 1 ? (ids.size() - 1) / decode_seconds : 0;
  }
};

// Token callback: called with each generated token as soon as it is chosen; return false to stop early.
using TokenCallback = std::function<bool(int32_t token)>;

// Runs generation over prompt (non-empty; every id < vocab, else throws "[generate] ..." errors).
GenerateResult generate(const Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = {});

// Checks every id is in [0, vocab); throws "[what] expected token ids in [0, V), got X at position i".
void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab, const char* what);

}  // namespace tern
