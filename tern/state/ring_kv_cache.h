// The ring KV cache of a sliding-window attention layer: holds only the last `window` positions (a
// buffer that grows up to `window`, then wraps); trimmable until it first wraps; reads give each query
// exactly its last `window` keys.
#pragma once
#include "tern/state/cache.h"
#include "tern/state/ring_round.h"

namespace tern {

class RingKVCache : public KVCache {
 public:
  // window > 0: the number of keys each query sees (its own included), and the positions kept.
  // Throws "[kv-cache] expected a ring window > 0, got ..." otherwise.
  explicit RingKVCache(int64_t window);

  // "kv:<dtype>:ring:<window>" ("kv:bf16:ring:<window>" before the first append).
  std::string signature() const override;
  // Positions appended so far (absolute; may exceed the window).
  int64_t offset() const override { return offset_; }
  // x [B, H, L, D] rotated at the absolute positions [offset, offset + L).
  Tensor next_positions(int64_t n) const override;
  // True while no stored position has been overwritten (offset <= window).
  bool is_trimmable() const override { return offset_ <= window_; }
  // Drops the last n positions (min(n, offset)); throws "[kv-cache] ... has wrapped" once it has wrapped.
  int64_t trim(int64_t n) override;
  int64_t bytes() const override;
  // k [B, Hkv, L, D], v [B, Hkv, L, Dv]; any L (also L > window). The read attends over the last
  // min(offset, window - 1) stored positions followed by the L new ones under a causal sliding-window
  // mask; afterwards the ring keeps the last `window` positions.
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Speculative rounds: appends inside a round first copy aside the positions from before the round
  // that they overwrite, so a rollback restores them even after the ring has wrapped. A round of more
  // than `window` positions can only be committed or kept whole (its first positions are gone).
  void spec_round_begin() override;
  void spec_round_commit() override;
  int64_t spec_round_rollback(int64_t keep) override;
  // Saves the held positions in time order and the offset; load() checks the window.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;

  // Compiled decode: under a DeviceStep a decode append writes row b at slot positions[b] % window and
  // reads every slot held, the first lengths[b] of them (order-free: a wrapped ring needs
  // no copy into time order). reserve() allocates min(positions, window) slots. No speculative round
  // and no trim while a step is attached.
  bool supports_device_step() const override { return true; }
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;

  int64_t window() const { return window_; }
  // Slots allocated now (<= window).
  int64_t capacity() const { return keys_.defined() ? keys_.size(2) : 0; }
  // Positions held: min(offset, window).
  int64_t stored() const { return std::min(offset_, window_); }
  // The held positions in time order (a copy when the ring has wrapped):
  // [B, Hkv, stored, D] and [B, Hkv, stored, Dv], covering positions [offset - stored, offset).
  Tensor temporal_keys() const { return temporal(keys_, stored()); }
  Tensor temporal_values() const { return temporal(values_, stored()); }

 private:
  // The last n (<= stored) positions of buf in time order.
  Tensor temporal(const Tensor& buf, int64_t n) const;
  void grow(const Tensor& k, const Tensor& v, int64_t needed);
  // Writes src [B, H, n, D] (n <= window) as positions [first, first + n) of buf.
  void write(Tensor& buf, const Tensor& src, int64_t first) const;
  // Inside a round: copies aside the positions from before it that appending n positions overwrites.
  void save_overwritten(int64_t n);

  int64_t window_ = 0;
  int64_t offset_ = 0;
  const DeviceStep* step_ = nullptr;
  Tensor keys_;    // [B, Hkv, capacity, D]; position p lives in slot p % window
  Tensor values_;  // [B, Hkv, capacity, Dv]
  RingRoundCopies round_{window_, 2};  // a speculative round's copies of overwritten positions ([B, Hkv, n, D])
};

}  // namespace tern
