// The cache contract (DESIGN.md §3): a cache owns its attention read, decides RoPE positions, names
// its storage with signature(), and says how far it can be trimmed or reused.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tern/core/tensor.h"
#include "tern/ops/rope.h"

namespace tern {

// decode: one query per row; window: L > 1 queries per row (prefill, a prefill chunk, a draft window).
enum class AppendPhase { decode, window };

// What append() hands back: attention of the appended queries over everything the cache holds
// (the appended keys included) under the cache's own mask. Valid until the next append or trim.
class AttentionRead {
 public:
  virtual ~AttentionRead() = default;
  // q [B, Hq, L, D] for the L positions just appended -> [B, Hq, L, Dv] in q's dtype.
  virtual Tensor attend(const Tensor& q, float scale, float softcap = 0.0f) const = 0;
};

class CacheWriter;
class CacheReader;

// The device buffers a compiled decode step reads instead of host values that change every step
// (DESIGN.md §2), so the step can be captured once and replayed: each batch row b appends its one
// token at positions[b] and attends to its first lengths[b] (= positions[b] + 1) keys, which lie in
// the first `span` stored positions. The buffers are owned by the step's runner.
struct DeviceStep {
  Tensor positions;  // [B] i32 on the device
  Tensor lengths;    // [B] i32 on the device
  int64_t span = 0;
};

class Cache {
 public:
  virtual ~Cache() = default;
  // Storage identity, e.g. "kv:bf16", "kv:f32", "kv:ring:4096"; persistence and capability checks compare it.
  virtual std::string signature() const = 0;
  // Positions stored so far (the next append starts here).
  virtual int64_t offset() const = 0;
  // The positions the next append of n tokens will take (i32): [n], the same for every row, or, while a
  // compiled decode step is attached, [B, 1] on the step's device.
  virtual Tensor next_positions(int64_t n) const = 0;
  // x [B, H, L, D] rotated at next_positions(L).
  Tensor rope_positions(const Tensor& x, const ops::RopeTable& rope) const;
  virtual bool is_trimmable() const = 0;
  // Drops the last n positions; returns how many were dropped (min(n, offset)). Throws if !is_trimmable().
  virtual int64_t trim(int64_t n) = 0;
  // The earliest prefix length a stored representation can resume from.
  virtual int64_t minimum_reusable_offset() const { return 0; }
  // Positions that can be appended before the next precision transition.
  virtual int64_t max_append_tokens() const { return std::numeric_limits<int64_t>::max(); }
  // Device bytes held now.
  virtual int64_t bytes() const = 0;
  // Persistence (tern/state/cache_file.h): save() writes everything needed to continue from this state;
  // load() restores it into a fresh cache of the same configuration, checking the stored configuration
  // against its own (a mismatch throws "[prompt-cache] <file>: ..."). The defaults throw
  // "[prompt-cache] storage <signature> does not support persistence yet".
  virtual void save(CacheWriter& out) const;
  virtual void load(CacheReader& in);

  // Compiled decode. supports_device_step(): whether decode appends can follow a DeviceStep.
  virtual bool supports_device_step() const { return false; }
  // Grows the storage to hold `positions` so it never moves while steps are captured (a captured step
  // bakes the addresses in). Needs one append first (it fixes the shapes); throws without support.
  virtual void reserve(int64_t positions);
  // While `step` is attached (nullptr detaches), decode appends and rope_positions follow it and leave
  // offset() alone; advance(n) then records the n positions the executed steps wrote. The step must
  // outlive the attachment. Throws "[kv-cache] ... compiled decode ..." without support.
  virtual void attach_step(const DeviceStep* step);
  virtual void advance(int64_t n);

  // Speculative rounds (DESIGN.md §3). spec_round_begin() marks offset(); the appends that follow are a
  // draft until spec_round_commit() accepts it, or spec_round_rollback(keep) keeps its first `keep`
  // positions and drops the rest. No precision transition happens inside a round: a bf16-first storage
  // converts at the commit or rollback that ends it. Where a storage can only return to its state at
  // begin (a recurrent state: spec_round_cuts_draft() false), rollback(keep) does that and returns
  // `keep`, the kept positions the caller must append again; otherwise it returns 0. The defaults cut
  // the draft by trim() (overridden where a storage cannot trim, e.g. a ring that has wrapped).
  // Throws "[kv-cache] ..." for a round not begun or begun twice, and keep outside [0, drafted].
  virtual void spec_round_begin();
  virtual void spec_round_commit();
  virtual int64_t spec_round_rollback(int64_t keep);
  virtual bool spec_round_cuts_draft() const { return true; }
  bool in_spec_round() const { return round_start_ >= 0; }

 protected:
  // Checks that a round is open and 0 <= keep <= the positions drafted since begin; returns those.
  int64_t check_spec_rollback(int64_t keep) const;
  void end_spec_round() { round_start_ = -1; }
  int64_t spec_round_start() const { return round_start_; }

 private:
  int64_t round_start_ = -1;  // offset() at spec_round_begin(); -1 outside a round
};

// Rolls every cache of one model back to `keep` drafted positions (null entries, e.g. KV-sharing layers,
// skipped). Where any storage can only return to its state at begin, every cache drops the whole
// draft instead and the caller must append the `keep` kept tokens again: returns how many (0 or keep).
int64_t spec_round_rollback_all(std::vector<std::unique_ptr<Cache>>& caches, int64_t keep);

// A cache of keys and values for one attention layer.
// The per-head q/k norms and the rotation of an attention layer (ops::norm_rope's arguments).
struct QKNormRope {
  Tensor wq, wk;  // [D] or undefined (scale-free)
  float eps = 1e-6f;
  const ops::RopeTable* rope = nullptr;
};

class KVCache : public Cache {
 public:
  // k [B, Hkv, L, D], v [B, Hkv, L, Dv] for the next L positions. Stores them and returns the read.
  // Under a compiled step a storage may leave the store to the read's first attend (the quantized
  // storage does, to encode in the read's own launches): attend the read.
  virtual std::unique_ptr<AttentionRead> append(const Tensor& k, const Tensor& v, AppendPhase phase) = 0;
  // append() for queries and keys still to be normed and rotated at next_positions(L): q [B, Hq, L, D]
  // and k (any strides, last dim contiguous). Returns the queries the read takes and the read. The
  // default runs ops::norm_rope, then append(), and returns the rotated queries; a storage may write the
  // keys and values from the norm_rope launch, or (a compiled step's read, step_read_norm_rope) leave the
  // norm, the rotation and the write to the read, which then takes q as given: call its attend once.
  struct RopedRead {
    Tensor q;
    std::unique_ptr<AttentionRead> read;
  };
  virtual RopedRead append_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const QKNormRope& n,
                                     AppendPhase phase);
};

// The read of unquantized storage: attention of queries at positions q_offset.. over k [B, Hkv, S, D]
// and v [B, Hkv, S, Dv] under a causal mask (and the last `window` keys only, when window > 0).
std::unique_ptr<AttentionRead> causal_read(Tensor k, Tensor v, int64_t q_offset, int64_t window = 0);

// The read of a compiled decode step over keys k [B, Hkv, >= span, D] and values v: row b attends to its
// first step.lengths[b] keys of the first step.span. in_place: the step wrote only each row's last key
// (position lengths[b] - 1) and nothing else the read sees (a ring's wrapped slot is elsewhere: false).
std::unique_ptr<AttentionRead> step_read(Tensor k, Tensor v, const DeviceStep& step, bool in_place);

// step_read(keys, values, step, true) with the step's preparation in front: its attend(q) takes the raw
// queries q [B, Hq, 1, D] and runs ops::norm_rope_write_sdpa of q, the raw key k [B, Hkv, 1, D] and the
// value v at step.positions (n's weights and table, which must outlive the read), writing the key and the
// value into keys and values (the whole storage, not a ring), then the read.
std::unique_ptr<AttentionRead> step_read_norm_rope(Tensor keys, Tensor values, const DeviceStep& step, Tensor k,
                                                   Tensor v, const QKNormRope& n);

// The argument checks of KVCache::append for a storage that keeps k and v as given: k [B, Hkv, L, D]
// and v [B, Hkv, L, Dv] agreeing with each other and (when defined) with the stored keys/values, and
// one position for a decode append. Throws "[kv-cache] expected ..." otherwise.
void check_kv_append(const Tensor& k, const Tensor& v, AppendPhase phase, const Tensor& keys, const Tensor& values);

// Positions [offset, offset + n) as an i32 tensor on the CPU (uniform across rows).
Tensor uniform_positions(int64_t offset, int64_t n);

}  // namespace tern
