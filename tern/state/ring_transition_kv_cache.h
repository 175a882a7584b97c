// bf16-first precision transitions on a sliding-window layer: the ring stores unquantized (RingKVCache)
// until an append leaves it holding >= start positions; that append is read unquantized, then the
// positions the ring still holds convert into the affine ring before append returns, each keeping its
// slot (the ring phase). The first append is always unquantized (even with start 0); the switch is
// irreversible. The sliding-window counterpart of TransitionKVCache.
#pragma once
#include <memory>

#include "tern/state/affine_ring_kv_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/transition_base.h"

namespace tern {

class RingTransitionKVCache : public TransitionBase {
 public:
  // start >= 0; quantized: the (empty) ring the cache converts into, whose window the plain ring takes.
  RingTransitionKVCache(int64_t start, std::unique_ptr<AffineRingKVCache> quantized);

  // The storage held now: the plain ring's signature before the transition, the affine ring's after.
  std::string signature() const override;
  int64_t offset() const override;
  Tensor next_positions(int64_t n) const override;
  // Whichever ring is held: trimmable until it has wrapped.
  bool is_trimmable() const override;
  int64_t trim(int64_t n) override;
  // 0 before the transition; the transition point after it (positions before it were re-encoded).
  int64_t minimum_reusable_offset() const override;
  // Before the transition: start - offset (at least 1); after it, unlimited.
  int64_t max_append_tokens() const override;
  int64_t bytes() const override;
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Saves start, whether it converted and where, then the ring held now (plain or affine); load()
  // checks start and the affine ring's signature.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;

  bool converted() const { return converted_; }
  int64_t transition_offset() const { return transition_; }
  const RingKVCache& plain() const { return plain_; }
  const AffineRingKVCache& quantized() const { return *quantized_; }

 private:
  KVCache& held() override { return converted_ ? static_cast<KVCache&>(*quantized_) : plain_; }
  void convert_if_due() override;

  int64_t start_ = 0;
  bool converted_ = false;
  int64_t transition_ = 0;
  RingKVCache plain_;
  std::unique_ptr<AffineRingKVCache> quantized_;
};

}  // namespace tern
