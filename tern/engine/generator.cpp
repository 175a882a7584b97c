// Generation loop.
#include "tern/engine/generator.h"

#include <algorithm>

#include "tern/base/timer.h"
#include "tern/engine/compiled_decode.h"
#include "tern/engine/prefill.h"
#include "tern/sample/device_sampler.h"

namespace tern {

void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i)
    TERN_CHECK(ids[i] >= 0 && ids[i] < vocab, "[{}] expected token ids in [0, {}), got {} at position {}", what, vocab,
               ids[i], i);
}

namespace {
// Greedy with nothing that reads the history or reshapes the row: the device argmax is the choice.
bool plain_greedy(const SamplingParams& p) {
  return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f && p.logit_bias.empty() && p.top_logprobs == 0;
}

Tensor ids_tensor(const int32_t* ids, int64_t n) {
  Tensor t = Tensor::empty({1, n}, Dtype::i32);
  std::copy(ids, ids + n, t.data<int32_t>());
  return t;
}
}  // namespace

GenerateResult generate(const Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
  TERN_CHECK(!prompt.empty(), "[generate] expected a non-empty prompt, got 0 tokens");
  TERN_CHECK(options.max_tokens >= 0, "[generate] expected max_tokens >= 0, got {}", options.max_tokens);
  const int64_t vocab = model.vocab_size();
  check_token_ids(prompt, vocab, "generate");
  validate(options.sampling, vocab);

  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.finish_reason = "length";
  if (options.max_tokens == 0 && options.prompt_cache_save.empty()) return r;

  CacheList caches = model.make_caches(options.kv);
  // Device logits (compiled steps) are sampled from device top-K candidates, the same token as Sampler.
  DeviceSampler sampler(options.sampling);
  std::vector<int32_t> history = prompt;

  Timer t;
  const int64_t n = r.prompt_tokens;
  Tensor logits;
  int64_t done = 0;
  if (!options.prompt_cache_load.empty()) {
    const std::string& path = options.prompt_cache_load;
    CacheFileContents c = load_cache_file(path, options.prompt_cache_identity, caches, model.options().device,
                                          model.options().dtype);
    const int64_t m = static_cast<int64_t>(c.ids.size());
    TERN_CHECK(m <= n, "[prompt-cache] {}: expected a prompt that starts with the file's {} tokens, got {} tokens", path,
               m, n);
    for (int64_t i = 0; i < m; ++i)
      TERN_CHECK(c.ids[i] == prompt[i],
                 "[prompt-cache] {}: expected a prompt that starts with the file's {} tokens, got {} instead of {} at "
                 "position {}",
                 path, m, prompt[i], c.ids[i], i);
    TERN_CHECK(m < n || c.logits.defined(), "[prompt-cache] {}: holds no logits to continue the whole prompt from", path);
    done = m;
    logits = c.logits;
  }
  r.cached_tokens = done;
  if (done < n) logits = prefill(model, ids_tensor(prompt.data() + done, n - done), caches, options.prefill_chunk);
  r.prefill_seconds = t.seconds();
  if (!options.prompt_cache_save.empty())
    save_cache_file(options.prompt_cache_save, options.prompt_cache_identity, prompt, logits, caches);
  if (options.max_tokens == 0) return r;

  t.reset();
  std::unique_ptr<CompiledDecoder> compiled;
  if (options.compiled_decode && options.max_tokens > 1 && CompiledDecoder::supported(model, caches))
    compiled = std::make_unique<CompiledDecoder>(model, caches, n + options.max_tokens);
  const bool device_greedy = compiled && plain_greedy(options.sampling);
  // Sampled steps without penalties or bias run the sampler's device part inside the step's graph.
  const bool graph_head = compiled && !device_greedy && DeviceSampler::head_supported(options.sampling);
  if (graph_head) compiled->set_head([&](const Tensor& l) { return sampler.head(l.reshape({vocab})); });
  for (int64_t step = 0; step < options.max_tokens; ++step) {
    Sampler::Result s;
    if (device_greedy && step > 0) {
      // Compiled step step - 1 chose this token; the next one is queued before it is read (a stop
      // wastes that one step).
      const CompiledDecoder::Greedy g = compiled->greedy_step(step - 1, step + 1 < options.max_tokens);
      s.token = g.ids[0];
      s.logprob = g.logprobs[0];
    } else if (graph_head && step > 0) {
      s = sampler.finish(compiled->head_out(), compiled->logits().reshape({vocab}), history);
    } else {
      const Tensor& row = compiled && step > 0 ? compiled->logits() : logits;
      s = sampler.sample(row.reshape({vocab}), history);
    }
    r.ids.push_back(s.token);
    r.logprobs.push_back(s.logprob);
    history.push_back(s.token);
    bool keep_going = !on_token || on_token(s.token);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), s.token) != options.stop_ids.end()) {
      r.finish_reason = "stop";
      break;
    }
    if (!keep_going) {
      r.finish_reason = "stop";
      break;
    }
    if (step + 1 == options.max_tokens) break;
    if (compiled) {
      // After a step the device already holds its argmax as the next input (and device-greedy steps
      // after the first are queued above).
      if (!(device_greedy && step > 0)) compiled->set_ids(std::span<const int32_t>(&s.token, 1));
      if (graph_head) sampler.prepare(model.options().device);
      if (compiled->steps() == step) compiled->step();
    } else {
      logits = model.forward(ids_tensor(&s.token, 1), caches, false);
    }
  }
  r.decode_seconds = t.seconds();
  return r;
}

}  // namespace tern
