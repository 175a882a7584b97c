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
// kv: the KV storage of the caches the chunks run through. A run of many chunks logs its progress every
// few seconds.
ScoreResult score_tokens(const Model& model, const std::vector<int32_t>& ids, int64_t chunk, bool keep_logits,
                         const KVCacheOptions& kv = {});

// The chunk `tern score --chunk auto` takes for n tokens of a vocab-wide model: 0 (one forward) while the
// forward's f32 logits [n, vocab] take at most logit_bytes, else the most positions whose logits do (at
// least 1).
int64_t score_chunk_within(int64_t n, int64_t vocab, int64_t logit_bytes);

}  // namespace tern
