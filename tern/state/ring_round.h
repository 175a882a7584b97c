// What a ring cache keeps aside during a speculative round (RingKVCache, AffineRingKVCache). Once the
// ring has wrapped, a round's appends overwrite the slots of positions from before the round, so those
// rows are copied out first, in time order (the copies stay contiguous), and a rollback writes back the
// ones the ring holds again. The rows keep the ring's own layout: the caches move them with take / put.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>

#include "tern/core/tensor.h"

namespace tern {

class RingRoundCopies {
 public:
  // A ring of `window` slots whose rows hold positions along dimension `dim`.
  RingRoundCopies(int64_t window, int dim) : window_(window), dim_(dim) {}

  // At the start of a round, the ring holding `offset` positions.
  void begin(int64_t offset) {
    clear();
    from_ = to_ = std::max<int64_t>(0, offset - window_);
  }
  // At a commit: the copies are no longer needed.
  void clear() { keys_ = values_ = Tensor(); }

  // Before n positions are appended at `offset` in a round that began at `start`: appending leaves the
  // ring holding [offset + n - window, offset + n), so the positions below that from before the round
  // are copied out, take(first, count) giving their keys and values (copies, not views of the ring).
  template <typename Take>
  void save(int64_t start, int64_t offset, int64_t n, Take&& take) {
    const int64_t to = std::min(start, offset + n - window_);
    if (to <= to_) return;
    auto [k, v] = take(to_, to - to_);
    keys_ = keys_.defined() ? concat(keys_, k, dim_) : k;
    values_ = values_.defined() ? concat(values_, v, dim_) : v;
    to_ = to;
  }

  // Rolls back a round that began at `start` and drafted `drafted` positions to keep `keep` of them:
  // put(keys, values, first) writes back the copies of the positions the ring holds again. Returns the
  // new offset, start + keep. A round longer than the window can only be kept whole.
  template <typename Put>
  int64_t rollback(int64_t start, int64_t drafted, int64_t keep, Put&& put) {
    check_rollback(drafted, keep, window_);
    const int64_t target = start + keep;
    const int64_t from = std::max(from_, target - window_);
    if (to_ > from) put(keys_.slice(dim_, from - from_, to_ - from_), values_.slice(dim_, from - from_, to_ - from_), from);
    clear();
    return target;
  }

 private:
  static Tensor concat(const Tensor& a, const Tensor& b, int dim);
  static void check_rollback(int64_t drafted, int64_t keep, int64_t window);

  int64_t window_;
  int dim_;
  Tensor keys_, values_;  // the copies of positions [from_, to_), in time order along dim_
  int64_t from_ = 0, to_ = 0;
};

}  // namespace tern
