// The shared body of the quantized KV storages (affine, TurboQuant): per position and head, a key
// row and a value row encoded by the storage's codecs (tern/ops/kv_quant.h) into fixed-size byte rows,
// held in tensors on the device of the first append; trimmable by whole positions. An append is read
// with its own keys/values unquantized and the stored rows packed (bf16-first: an append is read
// before it converts), then quantized on store: a decode append by the fused decode attention, a
// window by the window attention (tern/state/packed_read.h).
#pragma once
#include <cstdint>

#include "tern/ops/kv_quant.h"
#include "tern/state/cache.h"

namespace tern {

class QuantizedKVCache : public KVCache {
 public:
  int64_t offset() const override { return offset_; }
  Tensor next_positions(int64_t n) const override;
  bool is_trimmable() const override { return true; }
  int64_t trim(int64_t n) override;
  int64_t bytes() const override;
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Saves the packed rows as they are (never dequantized); load() checks signature() and row sizes.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;
  // Compiled decode: a decode append under a step encodes each batch row's key/value at
  // step.positions[b] and reads with the fused decode attention over the first step.span stored
  // positions, row b attending to its first positions[b] of them plus the appended one (no host read
  // of the positions on a device). On a device only head dims the fused kernel takes.
  bool supports_device_step() const override;
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;
  // Positions the storage holds without moving (>= offset()).
  int64_t capacity() const;

  // Quantizes k [B, Hkv, L, D], v [B, Hkv, L, Dv] onto the end of the storage without reading them
  // (the bf16-first transition hands its unquantized prefix over through this).
  void store(const Tensor& k, const Tensor& v);
  // The stored prefix decoded to the keys' and values' own domain: [B, Hkv, offset, D] / [.., Dv] f32,
  // on the storage's device.
  Tensor dequantized_keys() const;
  Tensor dequantized_values() const;
  // Encoded bytes of one position across every row and head (0 before the first store).
  int64_t bytes_per_position() const { return rows_ * (key_row_bytes_ + value_row_bytes_); }
  // The storage's short name for errors ("affine", "turboquant").
  virtual const char* kind_name() const = 0;
  // The row codecs of the configured storage (valid after the first store), as the kv_quant ops take them.
  virtual ops::KVRowCodec key_codec() const = 0;
  virtual ops::KVRowCodec value_codec() const = 0;

 protected:
  // Called once, at the first store: checks the head dims and fixes the codecs' dims.
  virtual void configure(int64_t key_dim, int64_t value_dim) = 0;
  // TurboQuant's deferred read for windows (values attended rotated); decode steps always read rotated.
  virtual bool deferred_values() const { return false; }

  int64_t key_dim_ = 0, value_dim_ = 0;

 private:
  void check_append(const Tensor& k, const Tensor& v) const;
  void ensure_configured(const Tensor& k, const Tensor& v);
  void grow(int64_t need, const Device& device);  // capacity >= need; the prefix moves over
  std::unique_ptr<AttentionRead> append_step(const Tensor& k, const Tensor& v);
  Tensor rows(bool keys, int64_t n) const;  // [n, B, Hkv, row bytes] view of the first n stored positions

  int64_t batch_ = 0, heads_ = 0, rows_ = 0;  // rows_ = batch_ * heads_
  int64_t key_row_bytes_ = 0, value_row_bytes_ = 0;
  int64_t offset_ = 0;
  const DeviceStep* step_ = nullptr;
  Tensor keys_, values_;  // u8 [capacity, B, Hkv, row bytes] (offset positions stored)
};

}  // namespace tern
