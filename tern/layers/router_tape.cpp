// RouterTape: recording and replaying routings (see router_tape.h).
#include "tern/layers/router_tape.h"

#include <algorithm>

#include "tern/base/error.h"
#include "tern/layers/moe.h"

namespace tern {
namespace {

RouterTape* g_active = nullptr;

}  // namespace

RouterTape* RouterTape::active() { return g_active; }

void RouterTape::run(Mode mode, const std::function<void()>& f) {
  TERN_CHECK(g_active == nullptr, "[router tape] expected one tape at a time, got a nested record or replay");
  mode_ = mode;
  g_active = this;
  try {
    f();
  } catch (...) {
    g_active = nullptr;
    mode_ = Mode::off;
    throw;
  }
  g_active = nullptr;
  mode_ = Mode::off;
}

void RouterTape::record(const std::function<void()>& f) { run(Mode::recording, f); }
void RouterTape::replay(const std::function<void()>& f) { run(Mode::replaying, f); }

void RouterTape::put(const Tensor& experts, int64_t n_expert, int64_t expert_bytes) {
  if (mode_ != Mode::recording) return;
  Tensor e = experts.to(Device::cpu()).contiguous();
  Choice c;
  c.T = e.size(0), c.k = e.size(1), c.n_expert = n_expert, c.expert_bytes = expert_bytes;
  c.experts.assign(e.data<int32_t>(), e.data<int32_t>() + e.numel());
  choices_.push_back(std::move(c));
}

RouterTape::Use RouterTape::use() const {
  Use u;
  for (const Choice& c : choices_) {
    std::vector<int32_t> e = c.experts;
    std::sort(e.begin(), e.end());
    const auto distinct = static_cast<int64_t>(std::unique(e.begin(), e.end()) - e.begin());
    u.fewest = u.routings == 0 ? distinct : std::min(u.fewest, distinct);
    u.most = std::max(u.most, distinct);
    ++u.routings;
    u.experts += distinct;
    u.of_experts += c.n_expert;
    u.bytes += distinct * c.expert_bytes;
    u.of_bytes += c.n_expert * c.expert_bytes;
  }
  return u;
}

bool RouterTape::take(const Tensor& probs, int64_t k, bool renormalize, RouterChoice& out) {
  if (mode_ != Mode::replaying) return false;
  const int64_t T = probs.size(0), E = probs.size(1);
  TERN_CHECK(cursor_ < choices_.size(), "[router tape] expected a recorded routing, got routing {} of a tape of {}",
             cursor_ + 1, choices_.size());
  const Choice& c = choices_[cursor_++];
  TERN_CHECK(c.T == T && c.k == k, "[router tape] expected routing {} as recorded ([{}, {}]), got [{}, {}]", cursor_,
             c.T, c.k, T, k);
  const std::vector<float> p = probs.to(Device::cpu()).to_f32_vector();  // [T, E]
  std::vector<float> w(static_cast<size_t>(T * k));
  for (int64_t t = 0; t < T; ++t) {
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = c.experts[static_cast<size_t>(t * k + j)];
      TERN_CHECK(e >= 0 && e < E, "[router tape] expected experts in [0, {}), got {}", E, e);
      sum += w[static_cast<size_t>(t * k + j)] = p[static_cast<size_t>(t * E + e)];
    }
    if (renormalize)
      for (int64_t j = 0; j < k; ++j) w[static_cast<size_t>(t * k + j)] /= sum;
  }
  out.weights = Tensor::from_vector(w, {T, k}).to(probs.device());
  out.experts = Tensor::from_vector(c.experts, {T, k}).to(probs.device());
  return true;
}

}  // namespace tern
