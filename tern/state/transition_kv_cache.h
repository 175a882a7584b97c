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

  const QuantizedKVCache& quantized() const { return *quantized_; }

 private:
  KVCache& plain_storage() override { return plain_; }
  KVCache& quantized_storage() override { return *quantized_; }
  void convert() override;

  PlainKVCache plain_;
  std::unique_ptr<QuantizedKVCache> quantized_;
};

}  // namespace tern
