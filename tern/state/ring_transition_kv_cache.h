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

  const RingKVCache& plain() const { return plain_; }
  const AffineRingKVCache& quantized() const { return *quantized_; }

 private:
  KVCache& plain_storage() override { return plain_; }
  KVCache& quantized_storage() override { return *quantized_; }
  void convert() override;

  RingKVCache plain_;
  std::unique_ptr<AffineRingKVCache> quantized_;
};

}  // namespace tern
