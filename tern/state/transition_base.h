// TransitionBase: what the two bf16-first caches (plain -> quantized, ring -> affine ring) share -- the
// storage they hold now, and speculative rounds run on it with the transition deferred to the round's end.
#pragma once
#include "tern/state/cache.h"

namespace tern {

class TransitionBase : public KVCache {
 public:
  // The held storage's round; the transition waits for the commit or rollback that ends the round (a
  // ring restores what the round overwrote). rollback returns the held storage's replay count.
  void spec_round_begin() override {
    KVCache::spec_round_begin();
    held().spec_round_begin();
  }
  void spec_round_commit() override {
    KVCache::spec_round_commit();
    held().spec_round_commit();
    convert_if_due();
  }
  int64_t spec_round_rollback(int64_t keep) override {
    check_spec_rollback(keep);
    const int64_t replay = held().spec_round_rollback(keep);
    end_spec_round();
    convert_if_due();
    return replay;
  }

 protected:
  // The storage held now: the plain one before the transition, the quantized one after it.
  virtual KVCache& held() = 0;
  // The bf16-first switch once the plain storage holds >= start positions (never inside a round).
  virtual void convert_if_due() = 0;
};

}  // namespace tern
