// Affine storage on a sliding-window layer, signature "kv:ring:<window>:affine:<bits>:<group>": the
// ring of RingKVCache (the last `window` positions, position p in slot p % window; trimmable until it
// first wraps; RoPE positions absolute) holding packed affine rows (tern/ops/kv_quant.h) instead of
// activations, on the device of its first append. An append is read with its own keys/values as given
// and the stored positions packed (a decode append by the fused decode attention, a window decoded),
// then quantized on store.
#pragma once
#include <algorithm>
#include <cstdint>

#include "tern/ops/kv_quant.h"
#include "tern/state/cache.h"
#include "tern/state/ring_round.h"

namespace tern {

class AffineRingKVCache : public KVCache {
 public:
  // window > 0; bits 4 or 8; group 32, 64 or 128 (head_dim a multiple of it, checked at the first store).
  AffineRingKVCache(int64_t window, int bits, int64_t group);

  std::string signature() const override;
  int64_t offset() const override { return offset_; }
  // x [B, H, L, D] rotated at the absolute positions [offset, offset + L) ([B, 1] of the step while one
  // is attached).
  Tensor next_positions(int64_t n) const override;
  // True while no stored position has been overwritten (offset <= window).
  bool is_trimmable() const override { return offset_ <= window_; }
  // Drops the last n positions (min(n, offset)); throws "[kv-cache] ... has wrapped" once it has wrapped.
  int64_t trim(int64_t n) override;
  int64_t bytes() const override;
  // The read attends over the last min(offset, window - 1) stored positions and the L new ones (as
  // given) under a causal sliding-window mask; then the last min(L, window) are stored.
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Saves the held packed rows in time order (never dequantized) and the offset; load() checks the
  // signature and the row layout.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;

  // Compiled decode where the storage's device takes ring steps and the fused decode attention takes
  // the codecs (ops::kv_ring_steps_supported, ops::kv_decode_attention_supported): under a DeviceStep a decode append encodes row b into slot
  // positions[b] % window, and its read takes every slot held but that one (the oldest position, which
  // the window of the new one no longer holds) plus the new position as given, the first positions[b]
  // slots before the ring wraps. reserve() allocates min(positions, window) slots. No speculative round
  // and no trim while a step is attached.
  bool supports_device_step() const override;
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;

  // Speculative rounds, as RingKVCache: the packed rows of positions from before the round that its
  // appends overwrite are copied aside and restored on rollback (so it works after the ring wrapped).
  void spec_round_begin() override;
  void spec_round_commit() override;
  int64_t spec_round_rollback(int64_t keep) override;

  // Takes over a ring's contents without reading them: k [B, Hkv, n, D], v [.., Dv] hold positions
  // [offset - n, offset) in time order (n <= window); each lands in slot p % window, as in the ring it
  // came from. The cache must be empty.
  void adopt(const Tensor& k, const Tensor& v, int64_t offset);
  int64_t window() const { return window_; }
  // Positions held: min(offset, window).
  int64_t stored() const { return std::min(offset_, window_); }
  // The held positions decoded, in time order: [B, Hkv, stored, D] / [.., Dv] f32 on the storage's device.
  Tensor temporal_keys() const;
  Tensor temporal_values() const;

 private:
  void check_append(const Tensor& k, const Tensor& v) const;
  void ensure_configured(const Tensor& k, const Tensor& v);
  // Slots for positions [0, needed) before the first wrap, up to the window (the held rows move over).
  void grow(int64_t needed, const Device& device);
  // The packed rows of positions [first, first + n) (all held), [n, B, Hkv, row bytes] in time order: a
  // view of the ring unless they wrap around its end (then a copy).
  Tensor rows_at(const Tensor& ring, int64_t first, int64_t n) const;
  // Copies rows [n, B, Hkv, row bytes] of positions [first, first + n) into their slots (n <= window).
  void put_rows(Tensor& ring, const Tensor& rows, int64_t first) const;
  // Encodes k, v [B, Hkv, n, D] (n <= window) as positions [first, first + n) into their slots.
  void encode_at(const Tensor& k, const Tensor& v, int64_t first);
  // Inside a round: copies aside the rows of positions from before it that appending n overwrites.
  void save_overwritten(int64_t n);

  int64_t window_ = 0;
  ops::KVRowCodec key_, value_;
  int64_t batch_ = 0, heads_ = 0;  // 0 before the first store
  int64_t offset_ = 0;
  Tensor keys_, values_;  // u8 [slots, B, Hkv, row bytes], slots allocated up to the window
  RingRoundCopies round_{window_, 0};  // a speculative round's copies of overwritten positions ([n, B, Hkv, row bytes])
  const DeviceStep* step_ = nullptr;
};

}  // namespace tern
