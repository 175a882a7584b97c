// Speculative rounds on every storage (DESIGN.md §3): a round rolled back to `keep` drafted positions
// leaves the cache reading exactly as a cache that only ever saw the prefix and the kept positions --
// also for a ring (plain or affine) that wrapped during or before the round, and for the bf16-first
// transition, which never converts inside a round. A recurrent state returns to its snapshot and asks for a replay.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tern/base/error.h"
#include "tern/state/kv_cache_options.h"
#include "tern/state/recurrent_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/transition_kv_cache.h"

namespace tern {
namespace {

Tensor randn(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = d(rng);
  return Tensor::from_vector(v, shape);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_f32_vector(), y = b.to_f32_vector();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, double{std::fabs(x[i] - y[i])});
  return m;
}

constexpr int64_t kB = 2, kH = 2, kD = 64, kQ = 4;

// Positions [from, to) of one fixed K/V stream: the same values whichever cache appends them.
struct Stream {
  Tensor k, v;  // [B, H, 200, D]
  Stream() : k(randn({kB, kH, 200, kD}, 11)), v(randn({kB, kH, 200, kD}, 12)) {}
  Tensor keys(int64_t from, int64_t to) const { return k.slice(2, from, to).contiguous(); }
  Tensor values(int64_t from, int64_t to) const { return v.slice(2, from, to).contiguous(); }
};

std::unique_ptr<AttentionRead> append(KVCache& c, const Stream& s, int64_t from, int64_t to) {
  return c.append(s.keys(from, to), s.values(from, to), to - from == 1 ? AppendPhase::decode : AppendPhase::window);
}

struct Case {
  const char* kind;
  int64_t window, start;
};

std::unique_ptr<KVCache> make(const Case& c) {
  KVCacheOptions o;
  o.kind = c.kind;
  o.start = c.start;
  KVLayerInfo layer;
  layer.window = c.window;
  return make_kv_cache(o, layer);
}

// prefix P positions; a round drafting `draft` positions (in decode steps when `steps`, else one
// window) rolled back to `keep`; then 6 more positions in two appends, each read compared with a cache
// that appended the prefix and the kept positions (as one chunk) and then the same continuation.
void check_round(const Case& c, int64_t P, int64_t draft, int64_t keep, bool steps) {
  const Stream s;
  std::unique_ptr<KVCache> got = make(c), want = make(c);
  append(*got, s, 0, P);
  append(*want, s, 0, P);
  got->spec_round_begin();
  if (steps) {
    for (int64_t p = P; p < P + draft; ++p) append(*got, s, p, p + 1);
  } else {
    append(*got, s, P, P + draft);
  }
  if (auto* t = dynamic_cast<TransitionKVCache*>(got.get()); t && c.start > P)
    EXPECT_FALSE(t->converted()) << c.kind << ": converted inside a round";
  EXPECT_EQ(got->spec_round_rollback(keep), 0);
  EXPECT_FALSE(got->in_spec_round());
  if (keep > 0) append(*want, s, P, P + keep);
  ASSERT_EQ(got->offset(), want->offset());
  EXPECT_EQ(got->signature(), want->signature()) << c.kind;
  const Tensor q = randn({kB, kH * 2, 3, kD}, 13), q1 = randn({kB, kH * 2, 1, kD}, 14);
  int64_t at = P + keep;
  for (int64_t n : {3, 1, 1, 1}) {
    const Tensor& qq = n == 3 ? q : q1;
    Tensor a = append(*got, s, 100 + at, 100 + at + n)->attend(qq, 0.125f);
    Tensor b = append(*want, s, 100 + at, 100 + at + n)->attend(qq, 0.125f);
    EXPECT_LE(max_abs_diff(a, b), 1e-6) << c.kind << " window " << c.window << " P " << P << " draft " << draft
                                        << " keep " << keep << " at " << at;
    at += n;
  }
}

TEST(SpecRound, RollbackReadsAsIfOnlyTheKeptPositionsWereAppended) {
  const Case cases[] = {{"bf16", 0, 0},   {"affine8", 0, 0}, {"affine4", 0, 0}, {"turbo", 0, 0},
                        {"turbo", 0, 20}, {"bf16", 16, 0},   {"affine8", 16, 40}, {"affine8", 16, 0},
                        {"affine4", 16, 0}};
  for (const Case& c : cases)
    for (bool steps : {false, true})
      for (int64_t keep : {0, 2, 5}) {
        check_round(c, 12, 5, keep, steps);  // a ring of 16 wraps inside the round
        check_round(c, 30, 5, keep, steps);  // ... or had wrapped before it
      }
}

TEST(SpecRound, TransitionWaitsForTheRoundToEnd) {
  for (int64_t keep : {3, 8}) {
    const Case c{"affine8", 0, 20};
    check_round(c, 15, 10, keep, false);  // the draft crosses start = 20; keep 8 converts at the rollback
    auto t = make(c);
    const Stream s;
    append(*t, s, 0, 15);
    t->spec_round_begin();
    append(*t, s, 15, 25);
    auto& tc = dynamic_cast<TransitionKVCache&>(*t);
    EXPECT_FALSE(tc.converted());
    t->spec_round_commit();
    EXPECT_TRUE(tc.converted());
    EXPECT_EQ(tc.transition_offset(), 25);
  }
}

TEST(SpecRound, RingRoundLongerThanItsWindowCanOnlyBeKeptWhole) {
  const Stream s;
  RingKVCache ring(16);
  append(ring, s, 0, 20);
  ring.spec_round_begin();
  append(ring, s, 20, 40);
  EXPECT_THROW(ring.spec_round_rollback(3), Error);
  EXPECT_EQ(ring.spec_round_rollback(20), 0);
  EXPECT_EQ(ring.offset(), 40);
}

TEST(SpecRound, MisuseIsAnError) {
  RingKVCache ring(16);
  EXPECT_THROW(ring.spec_round_commit(), Error);
  EXPECT_THROW(ring.spec_round_rollback(0), Error);
  ring.spec_round_begin();
  EXPECT_THROW(ring.spec_round_begin(), Error);
  EXPECT_THROW(ring.spec_round_rollback(1), Error);  // nothing drafted
  ring.spec_round_commit();
  // An affine ring's round longer than its window, as the plain ring's.
  auto affine = make(Case{"affine8", 16, 0});
  const Stream s;
  append(*affine, s, 0, 30);
  affine->spec_round_begin();
  append(*affine, s, 30, 50);
  EXPECT_THROW(affine->spec_round_rollback(1), Error);
}

TEST(SpecRound, RecurrentStateReturnsToItsSnapshotAndAsksForAReplay) {
  const RecurrentShape shape{24, 4, 2, 8, 8};
  std::vector<std::unique_ptr<Cache>> caches;
  caches.push_back(std::make_unique<RecurrentCache>(shape));
  caches.push_back(nullptr);  // a KV-sharing layer owns no cache
  caches.push_back(make(Case{"bf16", 0, 0}));
  auto& r = static_cast<RecurrentCache&>(*caches[0]);
  auto& kv = static_cast<KVCache&>(*caches[2]);
  const Stream s;
  r.conv_state(1).copy_from(randn({1, 3, 24}, 1));
  r.recurrent_state(1).copy_from(randn({1, 2, 8, 8}, 2));
  r.advance(7);
  append(kv, s, 0, 7);
  const std::vector<float> conv = r.conv_state(1).to_f32_vector(), state = r.recurrent_state(1).to_f32_vector();
  for (auto& c : caches)
    if (c) c->spec_round_begin();
  r.conv_state(1).copy_from(randn({1, 3, 24}, 3));
  r.recurrent_state(1).copy_from(randn({1, 2, 8, 8}, 4));
  r.advance(4);
  append(kv, s, 7, 11);
  // Keeping 2 of 4: the recurrent state can only go back to the round's start, so every cache does and
  // the caller replays the 2 kept tokens.
  EXPECT_EQ(spec_round_rollback_all(caches, 2), 2);
  EXPECT_EQ(r.offset(), 7);
  EXPECT_EQ(kv.offset(), 7);
  EXPECT_EQ(r.conv_state(1).to_f32_vector(), conv);
  EXPECT_EQ(r.recurrent_state(1).to_f32_vector(), state);
  // Without a recurrent layer the draft is cut in place: nothing to replay.
  std::vector<std::unique_ptr<Cache>> plain;
  plain.push_back(make(Case{"bf16", 0, 0}));
  auto& p = static_cast<KVCache&>(*plain[0]);
  append(p, s, 0, 7);
  p.spec_round_begin();
  append(p, s, 7, 11);
  EXPECT_EQ(spec_round_rollback_all(plain, 2), 0);
  EXPECT_EQ(p.offset(), 9);
}

}  // namespace
}  // namespace tern
