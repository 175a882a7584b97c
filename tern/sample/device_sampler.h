// DeviceSampler: the Sampler's answer for logits that stay on the device. Bias and penalties patch a
// few ids of a device copy, greedy is a device argmax, temperature alone a device draw, the other
// modes draw on the host from the device's top-K candidates; only when those cannot decide the
// host's answer is the row copied over.
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
  // top_logprobs) values to the host, in one copy (two with penalties or bias; temperature with no
  // top-k, top-p or min-p draws on the device: ops::draw_index). Falls back to copying the whole row
  // (counted by full_row_copies) when the candidates cannot decide the answer: top-p whose nucleus is
  // not inside the kMaxCandidates best (or top_k > kMaxCandidates with top-p); min-p alone that does
  // not cut inside them; and rows the host rejects (NaN, +inf, all -inf, history ids outside the
  // vocab with penalties on), so the host raises its error.
  Sampler::Result sample(const Tensor& logits, std::span<const int32_t> history = {});

  const SamplingParams& params() const { return host_.params(); }
  // The random stream; its position() is the number of words drawn so far.
  const Rng& rng() const { return host_.rng(); }
  // Calls that took the device algorithm, and how many of those copied the whole row instead.
  int64_t device_calls() const { return device_calls_; }
  int64_t full_row_copies() const { return full_row_copies_; }

 private:
  // The result from the device row (contiguous [vocab]), or false when the host must decide.
  bool sample_on_device(const Tensor& raw, std::span<const int32_t> history, Sampler::Result& out);
  // The temperature as f32 [1] on device, uploaded once (not for every token).
  const Tensor& temperature(Device device);

  Sampler host_;
  bool device_path_on_cpu_;
  int64_t validated_vocab_ = 0;
  int64_t device_calls_ = 0;
  int64_t full_row_copies_ = 0;
  Tensor temperature_;
};

}  // namespace tern
