// RouterTape: records the experts every routing chooses and replays them into another run, so that a
// model in bf16 can be compared with its f32 reference under the same routing. A token whose top-k
// gap is below the bf16 rounding of its router logits otherwise takes other experts in the two runs
// (on small random checkpoints, at most prompts' first tokens), which no tolerance on logits can absorb
// -- the router's counterpart of a greedy near-tie (DESIGN.md §4). A recorded tape also says which share of
// the experts' weights its routings touched (use(): `tern bench` reports it for the batch's decode step).
// Off unless a tape is recording or replaying.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tern/core/tensor.h"

namespace tern {

struct RouterChoice;

class RouterTape {
 public:
  // Runs f with every routing appending its choice ([T, k] experts) to the tape.
  void record(const std::function<void()>& f);
  // Runs f with every routing taking the tape's next unreplayed choice instead of its own top-k; its
  // weights stay its own softmax at those experts (renormalised as it would be). Throws
  // "[router tape] ..." when a routing's shape differs from the recorded one or the tape runs out.
  void replay(const std::function<void()>& f);
  // Replays from the first choice again.
  void rewind() { cursor_ = 0; }
  size_t size() const { return choices_.size(); }

  // Called by route_top_k. While replaying: fills out from the next choice and returns true.
  bool take(const Tensor& probs, int64_t k, bool renormalize, RouterChoice& out);
  // While recording: appends the choice of experts [T, k] out of n_expert, each expert's weights taking
  // expert_bytes (0 when the caller does not say).
  void put(const Tensor& experts, int64_t n_expert, int64_t expert_bytes);

  // What the recorded routings chose: per routing, the distinct experts among its T * k choices (a
  // grouped expert product reads each of them once), summed and at their fewest and most, and their bytes.
  struct Use {
    int64_t routings = 0;
    int64_t experts = 0, of_experts = 0;  // distinct experts chosen, and experts there were, over all routings
    int64_t fewest = 0, most = 0;         // distinct experts of one routing
    int64_t bytes = 0, of_bytes = 0;      // the chosen experts' weights, and all experts' weights
  };
  Use use() const;

  // The tape of the routing in progress (nullptr when none records or replays).
  static RouterTape* active();

 private:
  struct Choice {
    int64_t T = 0, k = 0, n_expert = 0, expert_bytes = 0;
    std::vector<int32_t> experts;  // [T * k]
  };
  enum class Mode { off, recording, replaying };
  void run(Mode mode, const std::function<void()>& f);
  std::vector<Choice> choices_;
  size_t cursor_ = 0;
  Mode mode_ = Mode::off;
};

}  // namespace tern
