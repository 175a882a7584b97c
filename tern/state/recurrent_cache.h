// The recurrent cache of a gated DeltaNet layer: the conv history (the last K-1 projected inputs) and
// the delta-rule state [n_v_head, d_k, d_v] per row, both f32. A recurrent state cannot be trimmed; a
// speculative round rolls back by snapshot() before it and restore() + replay of the accepted tokens.
#pragma once
#include "tern/state/cache.h"

namespace tern {

struct RecurrentShape {
  int64_t conv_dim = 0;     // channels of the conv (q, k and v projections together)
  int64_t conv_kernel = 0;  // K; the history holds K-1 positions
  int64_t n_v_head = 0, d_k = 0, d_v = 0;
};

class RecurrentCache : public Cache {
 public:
  // A copy of everything the cache holds, for restore().
  struct Snapshot {
    Tensor conv, state;
    int64_t offset = 0;
  };

  // Throws "[recurrent-cache] expected ..." for a non-positive size.
  explicit RecurrentCache(const RecurrentShape& shape);

  std::string signature() const override { return "recurrent:f32"; }
  int64_t offset() const override { return offset_; }
  // A recurrent layer takes no positions: throws "[recurrent-cache] ...".
  Tensor next_positions(int64_t n) const override;
  bool is_trimmable() const override { return false; }
  // Throws: roll back with snapshot() / restore() and replay instead.
  int64_t trim(int64_t n) override;
  int64_t bytes() const override;
  // Saves the conv history, the delta-rule state and the offset; load() checks their shapes.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;

  // The state of `batch` rows on `device`, allocated as zeros on first use and moved there when held on
  // another device (a restored file is read onto the CPU); a different batch later throws.
  // conv [B, K-1, conv_dim], state [B, n_v_head, d_k, d_v]; callers update them in place.
  Tensor& conv_state(int64_t batch, Device device = Device::cpu());
  Tensor& recurrent_state(int64_t batch, Device device = Device::cpu());
  // Records that n more positions went through the layer.
  void advance(int64_t n) override;
  // What the layer calls after a forward of n positions: advance(n), except while a compiled decode step
  // is attached, when the decoder's advance() records the steps (a replayed graph runs no host code).
  void appended(int64_t n);

  // Compiled decode: the conv history and the state are updated in place on the device, so a step
  // needs no positions; reserve() needs the state allocated by a first forward.
  bool supports_device_step() const override { return true; }
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;

  // Speculative rounds: begin takes a snapshot; rollback(keep) restores it and returns keep (the caller
  // replays the kept tokens: a recurrent state cannot drop positions).
  void spec_round_begin() override;
  void spec_round_commit() override;
  int64_t spec_round_rollback(int64_t keep) override;
  bool spec_round_cuts_draft() const override { return false; }

  // A deep copy of the current state (no tensors when nothing was appended yet).
  Snapshot snapshot() const;
  // Returns the cache to a snapshot taken from it earlier.
  void restore(const Snapshot& s);

  const RecurrentShape& shape() const { return shape_; }

 private:
  void ensure(int64_t batch, Device device);

  RecurrentShape shape_;
  int64_t offset_ = 0;
  const DeviceStep* step_ = nullptr;
  Tensor conv_;   // [B, K-1, conv_dim]
  Tensor state_;  // [B, n_v_head, d_k, d_v]
  Snapshot round_;  // the state at spec_round_begin()
};

}  // namespace tern
