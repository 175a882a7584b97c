// DeviceSampler: bias and penalties computed on the host for the touched ids and scattered into a
// device copy; temperature, top-K candidates and the row mass on the device; warpers and the draw on
// the host through the Sampler's own functions, so the same kept set gives the same token. With no
// warper the draw itself runs on the device (ops::draw_index, the same integer rule as the host's).
#include "tern/sample/device_sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tern/base/error.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/reduce.h"

namespace tern {

namespace {

// Relative bound on the device row mass sum(exp(l - max)) against the host's f64 sum: the CUDA
// log_softmax of a vocabulary row sums f32 terms per thread (16 of them in each chunk of 4,096), then
// in a tree per chunk, then the chunks (at most 128), so its error stays near 1e-5 plus a few ulp of
// expf / logf; 1e-4 leaves a margin (vocab up to ~1M).
constexpr double kMassTol = 1e-4;

std::vector<int32_t> host_i32(const Tensor& t) {
  Tensor h = t.to(Device::cpu()).contiguous();
  const int32_t* p = h.data<int32_t>();
  return std::vector<int32_t>(p, p + h.numel());
}

Tensor upload(const std::vector<int32_t>& ids, Device dev) {
  return Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())}).to(dev);
}

// row[ids] of a contiguous [vocab] row, on the row's device.
Tensor gather(const Tensor& row, const std::vector<int32_t>& ids) {
  return ops::embedding(row.view({row.numel(), 1}), upload(ids, row.device()), Dtype::f32)
      .view({static_cast<int64_t>(ids.size())});
}

// The row after logit bias and penalties: raw itself when nothing applies, else a copy with the
// touched ids rewritten. Their values come from the host processors run on the gathered raw values
// (ids renumbered densely), so they match Sampler bit for bit. False when a history id is outside
// the vocab with penalties on (the host raises that error).
bool apply_penalties(const Tensor& raw, std::span<const int32_t> history, const SamplingParams& p, Tensor& out) {
  const int64_t vocab = raw.numel();
  const bool penalties = (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) &&
                         !history.empty();
  std::vector<int32_t> ids;
  for (const auto& [id, bias] : p.logit_bias) ids.push_back(id);
  if (penalties) {
    for (int32_t id : history) {
      if (id < 0 || id >= vocab) return false;
      ids.push_back(id);
    }
  }
  out = raw;
  if (ids.empty()) return true;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto dense = [&](int32_t id) {
    return static_cast<int32_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
  };
  std::vector<int32_t> dense_history;
  if (penalties) {
    dense_history.reserve(history.size());
    for (int32_t id : history) dense_history.push_back(dense(id));
  }
  std::unordered_map<int32_t, float> dense_bias;
  for (const auto& [id, bias] : p.logit_bias) dense_bias[dense(id)] = bias;

  std::vector<float> vals = gather(raw, ids).to(Device::cpu()).to_f32_vector();
  apply_logit_bias(vals, dense_bias);
  apply_repetition_penalty(vals, dense_history, p.repetition_penalty);
  apply_presence_frequency_penalty(vals, dense_history, p.presence_penalty, p.frequency_penalty);

  out = raw.clone();
  Tensor col = out.view({vocab, 1});
  const int64_t n = static_cast<int64_t>(ids.size());
  ops::scatter_rows(col, upload(ids, raw.device()), Tensor::from_vector(vals, {n, 1}).to(raw.device()));
  return true;
}

// What warp() keeps from the processed row q (contiguous [vocab]), decided from its best candidates
// on the device; false when they cannot decide it (or the host rejects q: +inf, all -inf).
bool device_warp(const Tensor& q, const SamplingParams& p, std::vector<Candidate>& out) {
  const int64_t vocab = q.numel();
  const bool top_k_fits = p.top_k > 0 && p.top_k <= DeviceSampler::kMaxCandidates;
  const int64_t k = std::min<int64_t>(top_k_fits ? p.top_k : DeviceSampler::kMaxCandidates, vocab);
  ops::TopK best = ops::topk(q, k);
  std::vector<float> values = best.values.to(Device::cpu()).to_f32_vector();
  std::vector<int32_t> ids = host_i32(best.indices);
  std::vector<Candidate> cands;
  cands.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i]) || values[i] == INFINITY) return false;
    if (values[i] != -INFINITY) cands.push_back({ids[i], values[i]});
  }
  if (cands.empty()) return false;
  // complete: every token above -inf is a candidate, so warp() sees exactly this list.
  const bool complete = k == vocab || values.back() == -INFINITY;
  if (top_k_fits || complete) {
    // warp() starts from ascending ids; top_k_filter re-sorts best first, so only then does the
    // order matter (top_p_filter sums its total in list order).
    if (!top_k_fits) {
      std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    }
    top_k_filter(cands, p.top_k);
    top_p_filter(cands, p.top_p);
    min_p_filter(cands, p.min_p);
    out = std::move(cands);
    return true;
  }
  // Only the k best of a longer list (sorted best first). top_k > k here when set: the host keeps
  // more than is held, so its top-p total is unknown.
  if (p.top_p < 1.0f) {
    if (p.top_k > 0) return false;
    // log_softmax at the argmax is exactly -log(sum(exp(q - max))) as the device summed it.
    const double log_mass = -static_cast<double>(gather(ops::log_softmax(q), {cands[0].id}).to(Device::cpu()).item<float>());
    const double mass = std::exp(log_mass);
    if (!top_p_filter_best(cands, p.top_p, mass * (1.0 - kMassTol), mass * (1.0 + kMassTol))) return false;
    min_p_filter(cands, p.min_p);
    out = std::move(cands);
    return true;
  }
  // min-p alone (after a top_k wider than the candidates): it cuts inside them when the weakest
  // fails, since every token outside has a logit <= the weakest's.
  if (p.min_p > 0.0f && cands.back().logit - cands.front().logit < std::log(p.min_p)) {
    min_p_filter(cands, p.min_p);
    out = std::move(cands);
    return true;
  }
  return false;
}

}  // namespace

DeviceSampler::DeviceSampler(SamplingParams p, bool device_path_on_cpu)
    : host_(std::move(p)), device_path_on_cpu_(device_path_on_cpu) {}

Sampler::Result DeviceSampler::sample(const Tensor& logits, std::span<const int32_t> history) {
  TERN_CHECK(logits.defined(), "[sample] expected a logits tensor, got an undefined one");
  if (logits.device().is_cpu() && !device_path_on_cpu_) return host_.sample(logits, history);
  TERN_CHECK(logits.dtype() == Dtype::f32, "[sample] expected f32 logits, got {}", dtype_name(logits.dtype()));
  TERN_CHECK(logits.rank() == 1 || (logits.rank() == 2 && logits.size(0) == 1),
             "[sample] expected logits [vocab] or [1, vocab], got {}", shape_str(logits.shape()));
  const int64_t vocab = logits.numel();
  if (vocab != validated_vocab_) {
    validate(host_.params(), vocab);
    validated_vocab_ = vocab;
  }
  Tensor raw = logits.contiguous().view({vocab});
  ++device_calls_;
  Rng& rng = host_.mutable_rng();
  const uint64_t start = rng.position();
  Sampler::Result r;
  if (sample_on_device(raw, history, r)) return r;
  rng.seek(start);
  ++full_row_copies_;
  return host_.sample(raw.to(Device::cpu()), history);
}

bool DeviceSampler::sample_on_device(const Tensor& raw, std::span<const int32_t> history, Sampler::Result& out) {
  const SamplingParams& p = host_.params();
  const int64_t vocab = raw.numel();
  Tensor work;
  if (!apply_penalties(raw, history, p, work)) return false;

  int32_t token;
  if (p.temperature == 0.0f) {
    token = ops::argmax(work).to(Device::cpu()).item<int32_t>();
    // +inf (the host rejects it) or -inf (the whole row is, and the host rejects that).
    if (!std::isfinite(gather(work, {token}).to(Device::cpu()).item<float>())) return false;
  } else {
    if (p.temperature != 1.0f) {
      work = ops::div(work, Tensor::full({1}, p.temperature, Dtype::f32).to(raw.device()));
    }
    if (p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) {
      // No warper: the whole row draws on the device by the host's integer rule. Its max checks it
      // first (NaN and +inf rank above every number in topk; -inf means the whole row is).
      const float m = ops::topk(work, 1).values.to(Device::cpu()).item<float>();
      if (!std::isfinite(m)) return false;
      token = ops::draw_index(work, m, host_.mutable_rng().uniform()).to(Device::cpu()).item<int32_t>();
    } else {
      std::vector<Candidate> kept;
      if (!device_warp(work, p, kept)) return false;
      token = draw_candidate(kept, host_.mutable_rng().uniform());
    }
  }

  // Raw logprobs: log_softmax of the raw row at the token and the top_logprobs ids, one copy with the
  // raw row's sum, which is NaN or +inf exactly when the row holds a NaN or +inf (the host rejects
  // those; a -inf sum only means a -inf logit).
  std::vector<int32_t> ids = {token};
  const int64_t k = std::min<int64_t>(p.top_logprobs, vocab);
  if (k > 0) {
    std::vector<int32_t> top = host_i32(ops::topk(raw, k).indices);
    ids.insert(ids.end(), top.begin(), top.end());
  }
  Tensor packed = ops::concat({gather(ops::log_softmax(raw), ids), ops::sum(raw, 0).view({1})}, 0);
  std::vector<float> got = packed.to(Device::cpu()).to_f32_vector();
  const float row_sum = got.back();
  if (std::isnan(row_sum) || row_sum == INFINITY) return false;
  out.token = token;
  out.logprob = got[0];
  out.top_logprobs.clear();
  for (int64_t i = 0; i < k; ++i) out.top_logprobs.emplace_back(ids[1 + i], got[1 + i]);
  return true;
}

}  // namespace tern
