// Teacher-forced scoring: mean negative log-likelihood and perplexity of a token sequence, computed
// in one forward or in chunks through the generation caches (later chunks read earlier ones from the cache).
#pragma once
#include <vector>

#include "tern/models/model.h"

namespace tern {

struct ScoreResult {
  int64_t n_tokens = 0;
  double nll = 0;         // mean over the n_tokens - 1 predicted tokens
  double perplexity = 0;  // exp(nll)
  Tensor logits;          // [n_tokens, vocab] f32, only when asked for
  double seconds = 0;
};

// ids: at least 2 tokens, each in [0, vocab). chunk 0 = one forward. keep_logits fills result.logits.
// kv: the KV storage of the caches the chunks run through.
ScoreResult score_tokens(const Model& model, const std::vector<int32_t>& ids, int64_t chunk, bool keep_logits,
                         const KVCacheOptions& kv = {});

}  // namespace tern
