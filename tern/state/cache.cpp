// Shared helpers of the cache contract.
#include "tern/state/cache.h"

#include <algorithm>

#include "tern/base/error.h"
#include "tern/ops/attention.h"
#include "tern/ops/norm_rope.h"

namespace tern {
namespace {

class CausalRead : public AttentionRead {
 public:
  CausalRead(Tensor k, Tensor v, int64_t q_offset, int64_t window) : k_(std::move(k)), v_(std::move(v)) {
    mask_.causal = true;
    mask_.q_offset = q_offset;
    mask_.window = window;
  }
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    return ops::sdpa(q, k_, v_, scale, mask_, softcap);
  }

 private:
  Tensor k_, v_;
  ops::AttentionMask mask_;
};

// A compiled step's mask: every row sees its first lengths[b] keys (its own new key is the last). With
// in_place (a cache whose step writes only that last key, its lengths advanced by an earlier step) the
// read tells the backend so: it may load the older keys before the step's own writes are done.
ops::AttentionMask step_mask(Tensor lengths, bool in_place) {
  ops::AttentionMask m;
  m.causal = false;
  m.kv_len = std::move(lengths);
  if (in_place) m.fresh_keys = 1;
  return m;
}

// A compiled step's read under step_mask.
class StepRead : public AttentionRead {
 public:
  StepRead(Tensor k, Tensor v, Tensor lengths, bool in_place)
      : k_(std::move(k)), v_(std::move(v)), mask_(step_mask(std::move(lengths), in_place)) {}
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    return ops::sdpa(q, k_, v_, scale, mask_, softcap);
  }

 private:
  Tensor k_, v_;
  ops::AttentionMask mask_;
};

// StepRead's read with the step's norm, rotation and key/value write in front (step_read_norm_rope).
class NormRopeStepRead : public AttentionRead {
 public:
  NormRopeStepRead(Tensor keys, Tensor values, const DeviceStep& step, Tensor k, Tensor v, const QKNormRope& n)
      : keys_(std::move(keys)), values_(std::move(values)), k_(std::move(k)), v_(std::move(v)),
        positions_(step.positions.view({step.positions.size(0), 1})), span_(step.span), n_(n),
        mask_(step_mask(step.lengths, true)) {}
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    return ops::norm_rope_write_sdpa(q, k_, v_, n_.wq, n_.wk, n_.eps, positions_, *n_.rope, keys_, values_, span_, scale,
                                     mask_, softcap);
  }

 private:
  mutable Tensor keys_, values_;  // written by attend (the storage's handles)
  Tensor k_, v_, positions_;
  int64_t span_;
  QKNormRope n_;
  ops::AttentionMask mask_;
};

}  // namespace

std::unique_ptr<AttentionRead> causal_read(Tensor k, Tensor v, int64_t q_offset, int64_t window) {
  return std::make_unique<CausalRead>(std::move(k), std::move(v), q_offset, window);
}

void Cache::save(CacheWriter&) const {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

void Cache::load(CacheReader&) {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

void Cache::reserve(int64_t) { TERN_THROW("[kv-cache] storage {} does not support compiled decode", signature()); }
void Cache::attach_step(const DeviceStep*) {
  TERN_THROW("[kv-cache] storage {} does not support compiled decode", signature());
}
void Cache::advance(int64_t) { TERN_THROW("[kv-cache] storage {} does not support compiled decode", signature()); }

KVCache::RopedRead KVCache::append_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const QKNormRope& n,
                                             AppendPhase phase) {
  TERN_CHECK(n.rope, "[kv-cache] expected a rope table for append_norm_rope");
  ops::NormRoped qk = ops::norm_rope(q, k, n.wq, n.wk, n.eps, next_positions(q.size(2)).to(q.device()), *n.rope);
  return {qk.q, append(qk.k, v, phase)};
}

std::unique_ptr<AttentionRead> step_read(Tensor k, Tensor v, const DeviceStep& step, bool in_place) {
  return std::make_unique<StepRead>(k.slice(2, 0, step.span), v.slice(2, 0, step.span), step.lengths, in_place);
}

std::unique_ptr<AttentionRead> step_read_norm_rope(Tensor keys, Tensor values, const DeviceStep& step, Tensor k,
                                                   Tensor v, const QKNormRope& n) {
  TERN_CHECK(n.rope, "[kv-cache] expected a rope table for a step read with norm_rope");
  return std::make_unique<NormRopeStepRead>(std::move(keys), std::move(values), step, std::move(k), std::move(v), n);
}

void check_kv_append(const Tensor& k, const Tensor& v, AppendPhase phase, const Tensor& keys, const Tensor& values) {
  TERN_CHECK(k.rank() == 4 && v.rank() == 4, "[kv-cache] expected k and v of rank 4 [B, Hkv, L, D], got {} and {}",
             shape_str(k.shape()), shape_str(v.shape()));
  TERN_CHECK(k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2) && k.dtype() == v.dtype(),
             "[kv-cache] expected k and v to agree on [B, Hkv, L] and dtype, got {} {} and {} {}", shape_str(k.shape()),
             dtype_name(k.dtype()), shape_str(v.shape()), dtype_name(v.dtype()));
  if (keys.defined()) {
    TERN_CHECK(k.size(0) == keys.size(0) && k.size(1) == keys.size(1) && k.size(3) == keys.size(3) &&
                   v.size(3) == values.size(3) && k.dtype() == keys.dtype(),
               "[kv-cache] expected appends of [{}, {}, L, {}] {}, got {} {}", keys.size(0), keys.size(1),
               keys.size(3), dtype_name(keys.dtype()), shape_str(k.shape()), dtype_name(k.dtype()));
  }
  TERN_CHECK(phase == AppendPhase::window || k.size(2) == 1, "[kv-cache] expected one position for a decode append, got {}",
             k.size(2));
}

Tensor Cache::rope_positions(const Tensor& x, const ops::RopeTable& rope) const {
  return ops::rope(x, next_positions(x.size(2)).to(x.device()), rope);
}

Tensor uniform_positions(int64_t offset, int64_t n) {
  Tensor p = Tensor::empty({n}, Dtype::i32);
  int32_t* d = p.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(offset + i);
  return p;
}


void Cache::spec_round_begin() {
  TERN_CHECK(round_start_ < 0, "[kv-cache] expected no speculative round in progress on {}, got one begun at {}",
             signature(), round_start_);
  round_start_ = offset();
}

void Cache::spec_round_commit() {
  TERN_CHECK(round_start_ >= 0, "[kv-cache] expected a speculative round to commit on {}, got none", signature());
  round_start_ = -1;
}

int64_t Cache::check_spec_rollback(int64_t keep) const {
  TERN_CHECK(round_start_ >= 0, "[kv-cache] expected a speculative round to roll back on {}, got none", signature());
  const int64_t drafted = offset() - round_start_;
  TERN_CHECK(keep >= 0 && keep <= drafted, "[kv-cache] expected to keep 0..{} drafted positions, got {}", drafted,
             keep);
  return drafted;
}

int64_t Cache::spec_round_rollback(int64_t keep) {
  const int64_t drafted = check_spec_rollback(keep);
  if (drafted > keep) {
    TERN_CHECK(is_trimmable(), "[kv-cache] storage {} cannot drop drafted positions now (it cannot be trimmed)",
               signature());
    trim(drafted - keep);
  }
  round_start_ = -1;
  return 0;
}

int64_t spec_round_rollback_all(std::vector<std::unique_ptr<Cache>>& caches, int64_t keep) {
  bool cuts = true;
  for (const auto& c : caches)
    if (c && !c->spec_round_cuts_draft()) cuts = false;
  int64_t replay = 0;
  for (auto& c : caches)
    if (c) replay = std::max(replay, c->spec_round_rollback(cuts ? keep : 0));
  return cuts ? replay : keep;
}

}  // namespace tern
