// DeviceSampler: the Sampler's answer for logits that stay on the device. Bias and penalties patch a
// few ids of a device copy, greedy is a device argmax, temperature without top-k a device draw (over
// the device's top-p / min-p nucleus), top-k draws on the host from the device's top-K candidates;
// only when those cannot decide the host's answer is the row copied over.
#pragma once
#include <cstdint>
#include <span>

#include "tern/core/tensor.h"
#include "tern/sample/sampler.h"

namespace tern {

class DeviceSampler {
 public:
  // Candidates copied per non-greedy step when top_k is off or larger than this.
  static constexpr int32_t kMaxCandidates = 1024;

  // Validates p and seeds the Rng exactly as Sampler does. device_path_on_cpu: CPU logits run the
  // device algorithm through the CPU op backends instead of Sampler (lets tests check the algorithm
  // without a GPU; the CPU log_softmax sums in long f32 lanes, so keep such rows to a few thousand).
  explicit DeviceSampler(SamplingParams p, bool device_path_on_cpu = false);

  // Sampler::sample on the host copy of logits: the same token, logprob, top_logprobs and Rng
  // position (one word per non-greedy call, none for greedy), and the same errors. logits: f32
  // [vocab] or [1, vocab] on a CUDA device or the CPU (CPU rows go to Sampler unless
  // device_path_on_cpu). history: prompt + generated ids, for the penalties. Copies O(history + K +
  // top_logprobs) values to the host, in one copy (two with penalties or bias). Without top-k the
  // token is drawn on the device (ops::top_p_mask for top-p and min-p, then ops::draw_index). Falls
  // back to copying the whole row (counted by full_row_copies) when the candidates cannot decide the
  // answer (top_k > kMaxCandidates with top-p, or with a min-p that does not cut inside them) and for
  // rows the host rejects (NaN, +inf, all -inf, history ids outside the vocab with penalties on), so
  // the host raises its error.
  Sampler::Result sample(const Tensor& logits, std::span<const int32_t> history = {});

  // The sampler as a compiled decode graph's head (tern/engine/compiled_decode.h): for parameters
  // without penalties or bias and temperature > 0, head() queues the device part of a sampled step
  // (device work only, so it can be captured) and returns what the host needs, packed [n] f32.
  // prepare(the logits' device) before each step the head runs in (a device draw takes its word there
  // and uploads it); finish() on the step's packed values and logits row gives sample()'s
  // result, falling back to the whole row as sample() does.
  static bool head_supported(const SamplingParams& p);
  Tensor head(const Tensor& raw);
  void prepare(Device device);
  Sampler::Result finish(const Tensor& packed, const Tensor& raw, std::span<const int32_t> history = {});

  const SamplingParams& params() const { return host_.params(); }
  // The random stream; its position() is the number of words drawn so far.
  const Rng& rng() const { return host_.rng(); }
  // Calls that took the device algorithm, and how many of those copied the whole row instead.
  int64_t device_calls() const { return device_calls_; }
  int64_t full_row_copies() const { return full_row_copies_; }

 private:
  // Where each piece of a step's packed values lies (the same for every step of one sampler).
  struct Plan {
    size_t at_sum = 0, at_top = 0, at_top_lp = 0;
    int64_t k_top = 0;
    bool direct = false;  // greedy, or no top-k: the token is chosen on the device
    size_t at_tok = 0, at_check = 0, at_lp = 0;
    int64_t k = 0;  // top-k's candidates
    size_t at_values = 0, at_ids = 0, at_lps = 0;
  };
  // The result from the device row (contiguous [vocab]), or false when the host must decide.
  bool sample_on_device(const Tensor& raw, std::span<const int32_t> history, Sampler::Result& out);
  // The temperature as f32 [1] on device, uploaded once (not for every token).
  const Tensor& temperature(Device device);
  // Queues the device part for raw (and work, raw after penalties) and returns the packed values;
  // a device draw uses u_dev (f32 [1] on the device) when given, else u.
  Tensor queue(const Tensor& raw, Tensor work, const Tensor* u_dev, float u, Plan& plan);
  // The host part on the fetched values; false when the host must decide from the whole row.
  bool decide(const Plan& plan, const std::vector<float>& got, int64_t vocab, Sampler::Result& out);

  Sampler host_;
  bool device_path_on_cpu_;
  int64_t validated_vocab_ = 0;
  int64_t device_calls_ = 0;
  int64_t full_row_copies_ = 0;
  Plan head_plan_;
  Tensor head_u_;             // f32 [1] on the device: a device draw's word for the next head
  Tensor temperature_;        // f32 [1] on the logits' device, made once (prepare() makes it before a capture)
  uint64_t head_start_ = 0;  // the stream's position before prepare()
};

}  // namespace tern
