// bf16-first precision transitions: the cache stores unquantized (the plain storage) until an append
// leaves it holding >= start positions; that append is read unquantized, then the whole prefix
// converts into the quantized storage before append returns. The first append is always unquantized
// (even with start 0), and the switch is irreversible.
#pragma once
#include <memory>

#include "tern/state/plain_kv_cache.h"
#include "tern/state/quantized_kv_cache.h"
#include "tern/state/transition_base.h"

namespace tern {

class TransitionKVCache : public TransitionBase {
 public:
  // start >= 0; quantized: the (empty) storage the cache converts into.
  TransitionKVCache(int64_t start, std::unique_ptr<QuantizedKVCache> quantized);

  // The storage held now: the plain one's signature before the transition, the quantized one's after.
  std::string signature() const override;
  int64_t offset() const override;
  Tensor next_positions(int64_t n) const override;
  bool is_trimmable() const override { return true; }
  int64_t trim(int64_t n) override;
  // 0 before the transition; the transition point after it (positions before it were re-encoded).
  int64_t minimum_reusable_offset() const override;
  // Before the transition: start - offset (at least 1: any append converts once start is reached);
  // after it, unlimited.
  int64_t max_append_tokens() const override;
  int64_t bytes() const override;
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Saves start, whether it converted and where, then the storage held now (plain or quantized);
  // load() checks start and the quantized storage's signature.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;
  // Compiled decode, once converted: the quantized storage follows the step (the transition itself is a
  // host decision, so it never happens inside a captured step).
  bool supports_device_step() const override { return converted_ && quantized_->supports_device_step(); }
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;

  bool converted() const { return converted_; }
  int64_t transition_offset() const { return transition_; }
  const QuantizedKVCache& quantized() const { return *quantized_; }

 private:
  KVCache& held() override { return converted_ ? static_cast<KVCache&>(*quantized_) : plain_; }
  void convert_if_due() override;

  int64_t start_ = 0;
  bool converted_ = false;
  int64_t transition_ = 0;
  PlainKVCache plain_;
  std::unique_ptr<QuantizedKVCache> quantized_;
};

}  // namespace tern
