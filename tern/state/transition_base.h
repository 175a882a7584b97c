// TransitionBase: what the two bf16-first caches (plain -> quantized, ring -> affine ring) share -- the
// storage they hold now (every query and the trim go to it), the transition's bookkeeping, speculative
// rounds run on the held storage with the transition deferred to the round's end, and persistence.
#pragma once
#include "tern/state/cache.h"

namespace tern {

class TransitionBase : public KVCache {
 public:
  // The storage held now: the plain one's signature before the transition, the quantized one's after.
  std::string signature() const override { return held().signature(); }
  int64_t offset() const override { return held().offset(); }
  Tensor next_positions(int64_t n) const override { return held().next_positions(n); }
  bool is_trimmable() const override { return held().is_trimmable(); }
  int64_t trim(int64_t n) override { return held().trim(n); }
  // 0 before the transition; the transition point after it (positions before it were re-encoded).
  int64_t minimum_reusable_offset() const override;
  // Before the transition: start - offset (at least 1: any append converts once start is reached);
  // after it, and for the first append with start 0 (read unquantized whatever its length), unlimited.
  int64_t max_append_tokens() const override;
  int64_t bytes() const override { return plain_storage().bytes() + quantized_storage().bytes(); }
  // Read by the held storage; outside a round the plain storage converts once it holds >= start.
  std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) override;
  // Saves start, whether it converted and where, then the storage held now; load() checks start and
  // the quantized storage's signature.
  void save(CacheWriter& out) const override;
  void load(CacheReader& in) override;

  // Compiled decode, once converted: the quantized storage follows the step (the transition itself is a
  // host decision, so it never happens inside a captured step). Before it, reserve, attach_step and
  // advance throw "[kv-cache] ... before its transition".
  bool supports_device_step() const override { return converted_ && quantized_storage().supports_device_step(); }
  void reserve(int64_t positions) override;
  void attach_step(const DeviceStep* step) override;
  void advance(int64_t n) override;

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

  bool converted() const { return converted_; }
  int64_t transition_offset() const { return transition_; }

 protected:
  // start >= 0.
  explicit TransitionBase(int64_t start);
  // The two storages (the quantized one empty until the transition).
  virtual KVCache& plain_storage() = 0;
  virtual KVCache& quantized_storage() = 0;
  const KVCache& plain_storage() const { return const_cast<TransitionBase*>(this)->plain_storage(); }
  const KVCache& quantized_storage() const { return const_cast<TransitionBase*>(this)->quantized_storage(); }
  KVCache& held() { return converted_ ? quantized_storage() : plain_storage(); }
  const KVCache& held() const { return converted_ ? quantized_storage() : plain_storage(); }
  // Hands the plain storage's positions to the quantized one and lets the plain storage go.
  virtual void convert() = 0;
  // The bf16-first switch once the plain storage holds >= start positions (never inside a round).
  void convert_if_due();

  int64_t start_ = 0;
  bool converted_ = false;
  int64_t transition_ = 0;
};

}  // namespace tern
