// The shared body of the quantized KV storages (affine, TurboQuant): per position and head, a key
// row and a value row encoded by the storage's codec into fixed-size byte rows; trimmable by whole
// positions. An append is read with its own keys/values unquantized and the stored prefix decoded,
// then quantized on store (bf16-first: an append is read before it converts). On CUDA the packed
// rows live on the device (tern/ops/kv_quant.h): a decode append is read by the fused kernel.
#pragma once
#include <cstdint>
#include <vector>

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
  // of the positions on a device). On the device only head dims the fused kernel takes.
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
  // Called once, at the first store: checks the head dims and returns the encoded row sizes.
  virtual void configure(int64_t key_dim, int64_t value_dim, int64_t& key_row_bytes, int64_t& value_row_bytes) = 0;
  virtual void encode_key(const float* x, uint8_t* out) const = 0;
  virtual void decode_key(const uint8_t* in, float* x) const = 0;
  virtual void encode_value(const float* x, uint8_t* out) const = 0;
  // Decodes a value row into the domain the read attends over (read_domain_value's domain).
  virtual void decode_value_for_read(const uint8_t* in, float* x) const = 0;
  // Decodes a value row into the values' own domain.
  virtual void decode_value(const uint8_t* in, float* x) const { decode_value_for_read(in, x); }
  // Maps an unquantized value row into the read's domain (identity unless values are read rotated).
  virtual void read_domain_value(float* x) const {}
  // Maps one attention-output row [Dv] from the read's domain back to the values' domain.
  virtual void finish_output_row(float* x) const {}
  virtual bool read_needs_finish() const { return false; }

  int64_t key_dim_ = 0, value_dim_ = 0;

 private:
  void check_append(const Tensor& k, const Tensor& v) const;
  void ensure_configured(const Tensor& k, const Tensor& v);
  Tensor decode_prefix(bool keys, bool read_domain, int64_t extra) const;
  bool on_device() const { return device_keys_.defined(); }
  void store_on_device(const Tensor& k, const Tensor& v);
  // The first n stored positions' packed key (or value) rows, u8 [n, B, Hkv, row bytes]: a view of the
  // host storage (no copy), valid until it next grows or shrinks, as an AttentionRead is.
  Tensor host_rows(bool keys, int64_t n) const;
  void grow_device(int64_t need, const Device& device);  // capacity >= need; the prefix moves over
  std::unique_ptr<AttentionRead> append_step(const Tensor& k, const Tensor& v);
  std::unique_ptr<AttentionRead> append_on_device(const Tensor& k, const Tensor& v, AppendPhase phase);
  Tensor device_rows(bool keys) const;  // [offset, B, Hkv, row bytes] view of the device storage

  int64_t batch_ = 0, heads_ = 0, rows_ = 0;  // rows_ = batch_ * heads_
  int64_t key_row_bytes_ = 0, value_row_bytes_ = 0;
  int64_t offset_ = 0;
  const DeviceStep* step_ = nullptr;
  std::vector<uint8_t> keys_, values_;  // [capacity, B, Hkv, row bytes] on the CPU (offset positions stored)
  Tensor device_keys_, device_values_;  // u8 [capacity, B, Hkv, row bytes] on a CUDA device
};

}  // namespace tern
