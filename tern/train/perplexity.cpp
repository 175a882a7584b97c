// score_tokens: log-softmax in double over each position's logits, accumulated per chunk.
#include "tern/train/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tern/base/timer.h"

namespace tern {

ScoreResult score_tokens(const Model& model, const std::vector<int32_t>& ids, int64_t chunk, bool keep_logits,
                         const KVCacheOptions& kv) {
  const int64_t n = static_cast<int64_t>(ids.size()), vocab = model.vocab_size();
  TERN_CHECK(n >= 2, "[score] expected at least 2 tokens, got {}", n);
  TERN_CHECK(chunk >= 0, "[score] expected chunk >= 0, got {}", chunk);
  for (int64_t i = 0; i < n; ++i)
    TERN_CHECK(ids[i] >= 0 && ids[i] < vocab, "[score] expected token ids in [0, {}), got {} at position {}", vocab,
               ids[i], i);
  ScoreResult r;
  r.n_tokens = n;
  if (keep_logits) r.logits = Tensor::empty({n, vocab}, Dtype::f32);
  Timer t;
  CacheList caches = model.make_caches(kv);
  const int64_t step = chunk > 0 ? chunk : n;
  double total = 0;
  for (int64_t s = 0; s < n; s += step) {
    const int64_t len = std::min(step, n - s);
    Tensor in = Tensor::empty({1, len}, Dtype::i32);
    std::copy(ids.begin() + s, ids.begin() + s + len, in.data<int32_t>());
    Tensor logits = model.forward(in, caches, true).contiguous();  // [1, len, vocab]
    const float* lp = logits.data<float>();
    for (int64_t i = 0; i < len; ++i) {
      const float* row = lp + i * vocab;
      if (keep_logits) std::memcpy(r.logits.data<float>() + (s + i) * vocab, row, vocab * sizeof(float));
      const int64_t pos = s + i;
      if (pos + 1 >= n) continue;
      double mx = row[0];
      for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
      total += (std::log(sum) + mx) - row[ids[pos + 1]];
    }
  }
  r.nll = total / static_cast<double>(n - 1);
  r.perplexity = std::exp(r.nll);
  r.seconds = t.seconds();
  return r;
}

}  // namespace tern
