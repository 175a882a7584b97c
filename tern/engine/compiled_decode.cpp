// CompiledDecoder: attaches the caches to device buffers, runs the first step eagerly (it creates the
// constants and plans a capture may not), then captures one graph per span bucket and replays it.
#include "tern/engine/compiled_decode.h"

#include <algorithm>
#include <bit>

#include "tern/base/log.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/reduce.h"

namespace tern {
namespace {

Tensor host_i32(std::span<const int32_t> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, Dtype::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

}  // namespace

bool CompiledDecoder::supported(const Model& model, const CacheList& caches) {
  if (!model.can_capture_decode()) return false;
  for (const auto& c : caches)
    if (c && !c->supports_device_step()) return false;
  return true;
}

int64_t CompiledDecoder::span_for(int64_t length, int64_t capacity) {
  const int64_t quarter = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(length, 1)))) / 4;
  const int64_t bucket = std::max<int64_t>(256, quarter);
  return std::min(capacity, (length + bucket - 1) / bucket * bucket);
}

CompiledDecoder::CompiledDecoder(const Model& model, CacheList& caches, int64_t max_positions, bool capture)
    : model_(model), caches_(caches), capture_(capture) {
  TERN_CHECK(supported(model, caches), "[compiled_decode] expected a CUDA model whose caches support device steps");
  const Cache* first = nullptr;
  for (const auto& c : caches) {
    if (!c) continue;
    if (!first) first = c.get();
    TERN_CHECK(c->offset() == first->offset(), "[compiled_decode] expected every cache at one offset, got {} and {}",
               first->offset(), c->offset());
  }
  TERN_CHECK(first && first->offset() > 0, "[compiled_decode] expected prefilled caches, got offset {}",
             first ? first->offset() : 0);
  offset_ = first->offset();
  TERN_CHECK(max_positions > offset_, "[compiled_decode] expected max_positions > {} (the prefilled offset), got {}",
             offset_, max_positions);
  capacity_ = max_positions;
  for (auto& c : caches) if (c) c->reserve(max_positions);

  // The batch is fixed by the first set_ids(), which also attaches the caches.
  step_.span = span_for(offset_ + 1, capacity_);
  memory_ = make_graph_memory();
  one_ = host_i32(std::vector<int32_t>{1}).to(model.options().device);
}

CompiledDecoder::~CompiledDecoder() {
  device_synchronize();
  for (auto& c : caches_)
    if (c) c->attach_step(nullptr);
}

void CompiledDecoder::set_ids(std::span<const int32_t> ids) {
  const Device dev = model_.options().device;
  const int64_t b = static_cast<int64_t>(ids.size());
  TERN_CHECK(b > 0, "[compiled_decode] expected one id per batch row, got none");
  if (batch_ == 0) {
    batch_ = b;
    ids_ = host_i32(ids).view({b, 1}).to(dev);
    logprobs_ = Tensor::zeros({b}, Dtype::f32, dev);
    std::vector<int32_t> counters(b, static_cast<int32_t>(offset_));
    counters.resize(2 * b, static_cast<int32_t>(offset_ + 1));
    counters_ = host_i32(counters).view({2, b}).to(dev);
    positions_ = counters_.select(0, 0);
    lengths_ = counters_.select(0, 1);
    readback_ = make_device_readback(2, static_cast<size_t>(b) * (sizeof(int32_t) + sizeof(float)));
    step_.positions = positions_;
    step_.lengths = lengths_;
    for (auto& c : caches_)
      if (c) c->attach_step(&step_);
    return;
  }
  TERN_CHECK(b == batch_, "[compiled_decode] expected {} ids (the batch), got {}", batch_, b);
  Tensor h = host_i32(ids).view({b, 1});
  ids_.copy_from(h);
}

CompiledDecoder::Outputs CompiledDecoder::body() {
  Outputs o;
  Tensor logits = model_.forward_device(ids_, caches_, false);  // [B, 1, V]
  o.logits = logits.view({batch_, logits.size(-1)});
  if (head_) {
    o.head = head_(o.logits);  // the head's caller sets the next ids: no greedy choice to make
  } else {
    Tensor ids = ids_.view({batch_});  // the choice is the next step's input, written in place
    ops::greedy_choice(o.logits, ids, logprobs_);
  }
  ops::binary_(counters_, one_, ops::BinaryOp::add);
  return o;
}

void CompiledDecoder::set_head(std::function<Tensor(const Tensor& logits)> head) {
  TERN_CHECK(!warm_, "[compiled_decode] expected set_head() before the first step");
  head_ = std::move(head);
}

void CompiledDecoder::step() {
  TERN_CHECK(batch_ > 0, "[compiled_decode] expected set_ids() before the first step");
  TERN_CHECK(offset_ < capacity_, "[compiled_decode] expected room for another position, got {} of {} reserved",
             offset_, capacity_);
  const int64_t span = span_for(offset_ + 1, capacity_);
  auto it = graphs_.find(span);
  if (capture_ && warm_ && it == graphs_.end()) {
    step_.span = span;
    Captured c;
    try {
      c.graph = capture_graph(*memory_, [&] { c.out = body(); });
      it = graphs_.emplace(span, std::move(c)).first;
    } catch (const Error& e) {
      // Some layer synchronised with the host (e.g. a mixture of experts sorting a large batch on the
      // host): nothing was queued, so the step runs eagerly, now and from here on.
      log_warn("[compiled_decode] the decode step cannot be captured ({}); decoding eagerly", e.what());
      capture_ = false;
      graphs_.clear();
    }
  }
  if (!capture_ || !warm_) {
    step_.span = span;
    out_ = body();
    warm_ = true;
  } else {
    it->second.graph->replay();
    out_ = it->second.out;
  }
  if (!head_) {
    // Queued behind the step and before the next, which rewrites ids_ in place.
    const Tensor srcs[] = {ids_, logprobs_};
    readback_->queue(static_cast<int>(steps_ % 2), srcs);
  }
  for (auto& c : caches_)
    if (c) c->advance(1);
  offset_ += 1;
  steps_ += 1;
}

const std::byte* CompiledDecoder::greedy_slot(int64_t i) const {
  TERN_CHECK(!head_, "[compiled_decode] expected no head for the greedy choice (a step with a head makes none)");
  TERN_CHECK(i >= 0 && i < steps_ && i + 2 >= steps_,
             "[compiled_decode] expected one of the last two steps (of {}) for the greedy choice, got step {}", steps_, i);
  return readback_->wait(static_cast<int>(i % 2));
}

CompiledDecoder::Greedy CompiledDecoder::greedy_step(int64_t i, bool queue_next) {
  TERN_CHECK(i == steps_ || i + 1 == steps_, "[compiled_decode] expected greedy_step({}) after {} steps", i, steps_);
  if (steps_ == i) step();
  if (queue_next && steps_ == i + 1) step();
  const std::byte* slot = greedy_slot(i);  // one wait for both
  const auto* ids = reinterpret_cast<const int32_t*>(slot);
  const auto* logprobs = reinterpret_cast<const float*>(slot + batch_ * sizeof(int32_t));
  return {std::vector<int32_t>(ids, ids + batch_), std::vector<float>(logprobs, logprobs + batch_)};
}

std::vector<int32_t> CompiledDecoder::greedy_ids(int64_t i) const {
  const auto* p = reinterpret_cast<const int32_t*>(greedy_slot(i));
  return std::vector<int32_t>(p, p + batch_);
}

std::vector<float> CompiledDecoder::greedy_logprobs(int64_t i) const {
  const auto* p = reinterpret_cast<const float*>(greedy_slot(i) + batch_ * sizeof(int32_t));
  return std::vector<float>(p, p + batch_);
}

}  // namespace tern
