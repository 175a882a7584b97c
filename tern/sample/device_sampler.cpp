// DeviceSampler: bias and penalties computed on the host for the touched ids and scattered into a
// device copy; temperature on the device. Without top-k the nucleus (ops::top_p_mask) and the draw
// (ops::draw_index) run on the device by the host's integer rules. With top-k the device finds the K
// candidates and the host warps and draws them through the Sampler's own functions, so the same kept
// set gives the same token.
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

// Device values for one copy to the host: f32 pieces, and i32 ids as f32 (exact below 2^24).
class Pack {
 public:
  // The offset of t's values in fetch()'s result.
  size_t add(const Tensor& t) {
    Tensor flat = t.reshape({t.numel()});
    parts_.push_back(flat.dtype() == Dtype::f32 ? flat : ops::cast(flat, Dtype::f32));
    const size_t at = size_;
    size_ += static_cast<size_t>(t.numel());
    return at;
  }
  Tensor tensor() const { return ops::concat(parts_, 0); }

 private:
  std::vector<Tensor> parts_;
  size_t size_ = 0;
};

// row[ids] of a contiguous [vocab] row for ids (i32) on the row's device.
Tensor gather_at(const Tensor& row, const Tensor& ids) {
  return ops::embedding(row.view({row.numel(), 1}), ids.reshape({ids.numel()}), Dtype::f32).view({ids.numel()});
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

// Whether the device draws the token itself: temperature with no top-k (the row draw, after the
// nucleus mask when top-p or min-p is on). Its word is taken before the row is checked; a row that
// falls back rewinds the stream.
bool draws_on_device(const SamplingParams& p) { return p.temperature != 0.0f && p.top_k <= 0; }

// How many of q's best the top-k warpers need on the device.
int64_t warp_candidates(const SamplingParams& p, int64_t vocab) {
  const bool top_k_fits = p.top_k > 0 && p.top_k <= DeviceSampler::kMaxCandidates;
  return std::min<int64_t>(top_k_fits ? p.top_k : DeviceSampler::kMaxCandidates, vocab);
}

// What warp() keeps from the processed row q (vocab ids), decided from its best candidates (values
// best first, their ids) fetched from the device, for top_k > 0. False when they cannot decide it (or
// the host rejects q: +inf, all -inf).
bool warp_from_best(const float* values, const float* ids, int64_t k, int64_t vocab, const SamplingParams& p,
                    std::vector<Candidate>& out) {
  const bool top_k_fits = p.top_k > 0 && p.top_k <= DeviceSampler::kMaxCandidates;
  std::vector<Candidate> cands;
  cands.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    if (std::isnan(values[i]) || values[i] == INFINITY) return false;
    if (values[i] != -INFINITY) cands.push_back({static_cast<int32_t>(ids[i]), values[i]});
  }
  if (cands.empty()) return false;
  // complete: every token above -inf is a candidate, so warp() sees exactly this list.
  const bool complete = k == vocab || values[k - 1] == -INFINITY;
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
  // Only the k best of a longer list (sorted best first), top_k > k: the host keeps more than is
  // held, so its top-p total is unknown.
  if (p.top_p < 1.0f) return false;
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

const Tensor& DeviceSampler::temperature(Device device) {
  if (!temperature_.defined() || temperature_.device() != device)
    temperature_ = Tensor::full({1}, host_.params().temperature, Dtype::f32).to(device);
  return temperature_;
}

bool DeviceSampler::sample_on_device(const Tensor& raw, std::span<const int32_t> history, Sampler::Result& out) {
  const SamplingParams& p = host_.params();
  const int64_t vocab = raw.numel();
  if (vocab >= (int64_t(1) << 24)) return false;  // ids travel as f32
  Tensor work;
  if (!apply_penalties(raw, history, p, work)) return false;
  const float u = draws_on_device(p) ? host_.mutable_rng().uniform() : 0.0f;
  Plan plan;
  const Tensor packed = queue(raw, work, nullptr, u, plan);
  return decide(plan, packed.to(Device::cpu()).to_f32_vector(), vocab, out);
}

Tensor DeviceSampler::queue(const Tensor& raw, Tensor work, const Tensor* u_dev, float u, Plan& plan) {
  const SamplingParams& p = host_.params();
  const int64_t vocab = raw.numel();
  // Everything the host needs comes back in one copy: what decides the token, the raw row's
  // log-softmax at every id the result may name, the raw row's sum (NaN or +inf exactly when the row
  // holds one; the host rejects those, while a -inf sum only means a -inf logit) and the top logprobs.
  const Tensor lsm = ops::log_softmax(raw);
  Pack pack;
  plan.at_sum = pack.add(ops::sum(raw, 0));
  plan.k_top = std::min<int64_t>(p.top_logprobs, vocab);
  if (plan.k_top > 0) {
    const Tensor top = ops::topk(raw, plan.k_top).indices;
    plan.at_top = pack.add(top);
    plan.at_top_lp = pack.add(gather_at(lsm, top));
  }
  plan.direct = p.temperature == 0.0f || draws_on_device(p);
  if (p.temperature != 0.0f && p.temperature != 1.0f) work = ops::div(work, temperature(raw.device()));
  if (plan.direct) {
    // Greedy: the device argmax, whose processed logit must be finite (+inf: the host rejects it; -inf:
    // the whole row is). Otherwise the row draw on the device by the host's integer rule, from the
    // row's max (NaN and +inf rank above every number in topk; -inf means the whole row is), over the
    // nucleus top-p and min-p keep (ops::top_p_mask, the host's integer top-p rule).
    Tensor tok, check;
    if (p.temperature == 0.0f) {
      tok = ops::argmax(work);
      check = gather_at(work, tok);
    } else {
      check = ops::topk(work, 1).values;
      if (p.top_p < 1.0f || p.min_p > 0.0f)
        work = ops::top_p_mask(work, check, p.top_p, p.min_p > 0.0f ? std::log(p.min_p) : -INFINITY);
      tok = u_dev ? ops::draw_index(work, check, *u_dev) : ops::draw_index(work, check, u);
    }
    plan.at_tok = pack.add(tok), plan.at_check = pack.add(check), plan.at_lp = pack.add(gather_at(lsm, tok));
  } else {
    plan.k = warp_candidates(p, vocab);
    const ops::TopK best = ops::topk(work, plan.k);
    plan.at_values = pack.add(best.values), plan.at_ids = pack.add(best.indices);
    plan.at_lps = pack.add(gather_at(lsm, best.indices));
  }
  return pack.tensor();
}

bool DeviceSampler::decide(const Plan& plan, const std::vector<float>& got, int64_t vocab, Sampler::Result& out) {
  const SamplingParams& p = host_.params();
  int32_t token = 0;
  float logprob = 0.0f;
  if (plan.direct) {
    if (!std::isfinite(got[plan.at_check])) return false;
    token = static_cast<int32_t>(got[plan.at_tok]);
    logprob = got[plan.at_lp];
    if (std::isnan(got[plan.at_sum]) || got[plan.at_sum] == INFINITY) return false;
  } else {
    const int64_t k = plan.k;
    std::vector<Candidate> kept;
    if (!warp_from_best(&got[plan.at_values], &got[plan.at_ids], k, vocab, p, kept)) return false;
    if (std::isnan(got[plan.at_sum]) || got[plan.at_sum] == INFINITY) return false;
    token = draw_candidate(kept, host_.mutable_rng().uniform());
    const float* ids = &got[plan.at_ids];
    const int64_t pos = std::find(ids, ids + k, static_cast<float>(token)) - ids;
    TERN_ASSERT(pos < k, "the drawn token {} is not among the {} candidates", token, k);
    logprob = got[plan.at_lps + static_cast<size_t>(pos)];
  }
  out.token = token;
  out.logprob = logprob;
  out.top_logprobs.clear();
  for (int64_t i = 0; i < plan.k_top; ++i)
    out.top_logprobs.emplace_back(static_cast<int32_t>(got[plan.at_top + i]), got[plan.at_top_lp + i]);
  return true;
}

bool DeviceSampler::head_supported(const SamplingParams& p) {
  return p.temperature > 0.0f && p.logit_bias.empty() && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f;
}

Tensor DeviceSampler::head(const Tensor& raw) {
  TERN_CHECK(head_supported(host_.params()), "[sample] expected parameters without penalties or bias and a "
             "temperature > 0 for a graph head");
  TERN_CHECK(raw.dtype() == Dtype::f32 && raw.rank() == 1 && raw.numel() < (int64_t(1) << 24),
             "[sample] expected a logits row f32 [vocab] of fewer than 2^24 ids, got {} {}", dtype_name(raw.dtype()),
             shape_str(raw.shape()));
  TERN_CHECK(head_u_.defined() && head_u_.device() == raw.device(),
             "[sample] expected prepare() on the logits' device before a step with a sampler head");
  return queue(raw, raw, &head_u_, 0.0f, head_plan_);
}

void DeviceSampler::prepare(Device device) {
  const SamplingParams& p = host_.params();
  Rng& rng = host_.mutable_rng();
  head_start_ = rng.position();
  if (!head_u_.defined() || head_u_.device() != device) head_u_ = Tensor::full({1}, 0.0f, Dtype::f32).to(device);
  // A device draw's word is taken now (finish() rewinds on a fallback).
  if (p.temperature != 1.0f) temperature(device);  // made now: a capture cannot upload
  if (draws_on_device(p)) head_u_.copy_from(Tensor::full({1}, rng.uniform(), Dtype::f32));
}

Sampler::Result DeviceSampler::finish(const Tensor& packed, const Tensor& raw, std::span<const int32_t> history) {
  const int64_t vocab = raw.numel();
  if (vocab != validated_vocab_) {
    validate(host_.params(), vocab);
    validated_vocab_ = vocab;
  }
  ++device_calls_;
  Sampler::Result r;
  if (decide(head_plan_, packed.to(Device::cpu()).to_f32_vector(), vocab, r)) return r;
  host_.mutable_rng().seek(head_start_);
  ++full_row_copies_;
  return host_.sample(raw.to(Device::cpu()), history);
}

}  // namespace tern
