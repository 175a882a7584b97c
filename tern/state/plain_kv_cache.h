// The plain KV cache: keys and values stored unquantized in the activation dtype, in buffers that
// grow in 256-position steps; trimmable; attention reads the stored prefix under a causal mask.
#pragma once
#include "tern/state/cache.h"

namespace tern {

class PlainKVCache : public KVCache {
 public:
  static constexpr int64_t kStep = 256;

  // window > 0 limits each query to the last `window` keys (sliding-window attention) while still
  // storing every position; 0 means full attention.
  explicit PlainKVCache(int64_t window = 0) : window_(window) {}

  std::string signature() const override;
  int64_t offset() const override { return offset_; }
  Tensor next_positions(int64_t n) const override;
  bool is_trimmable() const override { return true; }
  int64_t trim(int64_t n) override;
  int64_t bytes() const override;
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // While a compiled step is attached, the read does the norm, the rotation and the write of the keys and
  // values into their slots (step_read_norm_rope: ops::norm_rope_write_sdpa) and takes q as given;
  // otherwise the default.
  RopedRead append_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const QKNormRope& n,
                             AppendPhase phase) override;
  // Saves the stored prefix [B, Hkv, offset, D] as is; load() checks the window.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;
  // Compiled decode: full-attention storage only (a sliding window would need per-row window starts).
  bool supports_device_step() const override { return window_ == 0; }
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;

  int64_t capacity() const { return keys_.defined() ? keys_.size(2) : 0; }
  // Views of the stored prefix: [B, Hkv, offset, D] and [B, Hkv, offset, Dv].
  Tensor keys() const;
  Tensor values() const;

 private:
  void reserve(const Tensor& k, const Tensor& v, int64_t needed);

  int64_t window_ = 0;
  int64_t offset_ = 0;
  const DeviceStep* step_ = nullptr;
  Tensor keys_;    // [B, Hkv, capacity, D]
  Tensor values_;  // [B, Hkv, capacity, Dv]
};

}  // namespace tern
