// Compiled decode (DESIGN.md §2): the decode step of a model on CUDA captured as a CUDA graph per span
// bucket and replayed, with the token ids, positions and lengths in device buffers; a replay changes
// only those buffers. The step also leaves the greedy choice (argmax) and its log-probability on the
// device, so a greedy loop copies one id per row to the host.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "tern/models/model.h"
#include "tern/ops/graph.h"

namespace tern {

class CompiledDecoder {
 public:
  // True when model.can_capture_decode() and every cache supports device steps (nullptr caches allowed).
  static bool supported(const Model& model, const CacheList& caches);
  // caches: prefilled to one offset > 0 (the same for every cache), and reserved here for
  // max_positions (the most positions any will hold; throws "[compiled_decode] ..." otherwise).
  // capture = false runs every step eagerly through the same device-buffer path: the reference a replay
  // must equal bit for bit. Attaches the caches until destruction.
  CompiledDecoder(const Model& model, CacheList& caches, int64_t max_positions, bool capture = true);
  ~CompiledDecoder();
  CompiledDecoder(const CompiledDecoder&) = delete;
  CompiledDecoder& operator=(const CompiledDecoder&) = delete;

  // The ids the next step appends, one per batch row (after a step they are its greedy choice).
  void set_ids(std::span<const int32_t> ids);
  // Runs one decode step: appends the current ids at the caches' offset and advances them by one.
  void step();
  // Of the last step: logits [B, vocab] f32 on the device (valid until the next step).
  const Tensor& logits() const { return out_.logits; }
  // A head run inside every step on its logits [B, vocab] (device work only: it is captured with the
  // step, e.g. DeviceSampler::head) instead of the greedy choice: the caller sets every step's ids.
  // Set before the first step. head_out(): its result of the last step.
  void set_head(std::function<Tensor(const Tensor& logits)> head);
  const Tensor& head_out() const { return out_.head; }
  // Steps run so far.
  int64_t steps() const { return steps_; }
  // Of step i, one of the last two (steps() - 1 or steps() - 2), on the host: the argmax of each row
  // (first index on ties) and its log-probability under the logits. Each step queues its copy behind
  // it, so a loop can queue step i + 1 before it reads step i; a read waits for step i only. Not with
  // a head. Without i: the last step.
  std::vector<int32_t> greedy_ids(int64_t i) const;
  std::vector<float> greedy_logprobs(int64_t i) const;
  std::vector<int32_t> greedy_ids() const { return greedy_ids(steps_ - 1); }
  std::vector<float> greedy_logprobs() const { return greedy_logprobs(steps_ - 1); }
  // A greedy loop's step with its read one step behind: runs step i unless it has run, also queues step
  // i + 1 when queue_next (the device runs it while the host takes step i's result; the ids it reads
  // are already on the device), then returns step i's choice. Not with a head.
  struct Greedy {
    std::vector<int32_t> ids;
    std::vector<float> logprobs;
  };
  Greedy greedy_step(int64_t i, bool queue_next);

  int64_t offset() const { return offset_; }
  int64_t batch() const { return batch_; }
  // Graphs captured so far (one per span bucket reached).
  size_t graphs() const { return graphs_.size(); }
  // The keys a step at `length` visible positions attends over: length rounded up to a bucket
  // (256 positions, or a quarter of the largest power of two <= length when that is larger), capped.
  static int64_t span_for(int64_t length, int64_t capacity);

 private:
  struct Outputs {
    Tensor logits;  // [B, vocab] f32
    Tensor head;    // set_head's result
  };
  Outputs body();
  const std::byte* greedy_slot(int64_t i) const;

  const Model& model_;
  CacheList& caches_;
  int64_t batch_ = 0, offset_ = 0, capacity_ = 0, steps_ = 0;
  bool capture_ = true, warm_ = false;
  Tensor ids_;        // [B, 1] i32 on the device
  Tensor logprobs_;   // [B] f32: the greedy choice's
  Tensor counters_;   // [2, B] i32: positions_ and lengths_, advanced by one add a step
  Tensor positions_;  // [B] i32, row 0 of counters_
  Tensor lengths_;    // [B] i32, row 1
  Tensor one_;        // [1] i32 = 1
  std::unique_ptr<DeviceReadback> readback_;  // two slots of the greedy ids and log-probabilities
  std::function<Tensor(const Tensor&)> head_;
  DeviceStep step_;
  std::unique_ptr<GraphMemory> memory_;
  struct Captured {
    std::unique_ptr<CapturedGraph> graph;
    Outputs out;
  };
  std::map<int64_t, Captured> graphs_;  // span -> graph
  Outputs out_;
};

}  // namespace tern
