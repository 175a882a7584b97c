// score_tokens: each position's log-probability of the next token (ops::token_logprobs, on the logits'
// device), summed in double per chunk.
#include "tern/train/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tern/base/log.h"
#include "tern/base/timer.h"
#include "tern/ops/reduce.h"

namespace tern {

int64_t score_chunk_within(int64_t n, int64_t vocab, int64_t logit_bytes) {
  TERN_CHECK(n >= 0 && vocab >= 1 && logit_bytes >= 1,
             "[score] expected n >= 0, vocab >= 1 and a budget >= 1, got {}, {}, {}", n, vocab, logit_bytes);
  const int64_t row = vocab * static_cast<int64_t>(sizeof(float));
  const int64_t fit = std::max<int64_t>(logit_bytes / row, 1);
  return n <= fit ? 0 : fit;
}

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
  Every report(2.0);  // a run of many chunks logs its progress this often
  CacheList caches = model.make_caches(kv);
  const int64_t step = chunk > 0 ? chunk : n;
  double total = 0;
  for (int64_t s = 0; s < n; s += step) {
    const int64_t len = std::min(step, n - s);
    Tensor in = Tensor::empty({1, len}, Dtype::i32);
    std::copy(ids.begin() + s, ids.begin() + s + len, in.data<int32_t>());
    // Logits stay on the model's device; only each position's log-probability of the next token leaves it.
    const Tensor rows = model.forward_device(in, caches, true).reshape({len, vocab});
    if (keep_logits) {
      const Tensor h = rows.to(Device::cpu()).contiguous();
      std::memcpy(r.logits.data<float>() + s * vocab, h.data<float>(), len * vocab * sizeof(float));
    }
    const int64_t scored = std::min(len, n - 1 - s);  // positions with a next token
    if (scored <= 0) continue;
    Tensor next = Tensor::empty({scored}, Dtype::i32);
    std::copy(ids.begin() + s + 1, ids.begin() + s + 1 + scored, next.data<int32_t>());
    const Tensor lp = ops::token_logprobs(rows.narrow(0, 0, scored), next).to(Device::cpu());
    for (int64_t i = 0; i < scored; ++i) total -= lp.data<float>()[i];
    if (s + len < n && report.due())
      log_info("[score] {} of {} tokens, {:.0f} tok/s", s + len, n, static_cast<double>(s + len) / t.seconds());
  }
  r.nll = total / static_cast<double>(n - 1);
  r.perplexity = std::exp(r.nll);
  r.seconds = t.seconds();
  return r;
}

}  // namespace tern
