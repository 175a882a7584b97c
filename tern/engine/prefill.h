// Prompt prefill in bounded forwards: a long prompt, or a batch of them, goes through the caches a
// chunk of positions at a time, so its activations stay bounded by a token budget instead of growing
// with rows x positions (an 8B model's MLP alone holds about 3 x 12,288 x 2 bytes a token).
#pragma once
#include <cstdint>

#include "tern/models/model.h"

namespace tern {

// The default budget of one prefill forward, in tokens (rows x positions).
inline constexpr int64_t kDefaultPrefillTokens = 8192;

// Positions a forward of `rows` rows takes under a budget of `max_tokens` tokens: at least 1 (a row
// is never split across forwards by the budget); max_tokens <= 0 means no limit.
int64_t prefill_positions(int64_t rows, int64_t positions, int64_t max_tokens);

// Feeds ids [B, P] (i32, CPU) through the caches, prefill_positions(B, P, max_tokens) positions a
// forward, and returns the last forward's logits (all_logits false: [B, 1, V]). Unless max_tokens <= 0
// (one forward), chunks end at multiples of that many positions and also where a cache's bf16-first
// transition falls (--kv-start S > 0; Cache::max_append_tokens), so exactly the first S positions are
// read unquantized and the cuts after S stay where they would be without it. A prefill that takes
// longer than two seconds logs its progress (info level) every two seconds.
Tensor prefill(const Model& model, const Tensor& ids, CacheList& caches, int64_t max_tokens);

}  // namespace tern
