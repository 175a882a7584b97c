// BPE: the merge map, the heap-based merge loop (as tokenizers' Word::merge_all) and
// the per-word cache.
#include "tern/text/bpe.h"

#include <cstring>
#include <algorithm>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

constexpr size_t kMaxCachedWordBytes = 256;  // longer words are merged every time

}  // namespace

size_t StringHash::operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }

void Bpe::MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, ~0ull);
  values_.assign(cap, {0, 0});
  mask_ = cap - 1;
}

void Bpe::MergeMap::set(int32_t a, int32_t b, MergeValue v) {
  if ((count_ + 1) * 2 > keys_.size()) {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<MergeValue> old_values = std::move(values_);
    reserve(std::max<size_t>(count_ * 2, 16));
    count_ = 0;
    for (size_t k = 0; k < old_keys.size(); ++k)
      if (old_keys[k] != ~0ull) set(static_cast<int32_t>(old_keys[k] >> 32), static_cast<int32_t>(old_keys[k]), old_values[k]);
  }
  uint64_t k = key(a, b);
  size_t i = slot(k);
  while (keys_[i] != ~0ull && keys_[i] != k) i = (i + 1) & mask_;
  if (keys_[i] == ~0ull) ++count_;
  keys_[i] = k;
  values_[i] = v;
}

const Bpe::MergeValue* Bpe::MergeMap::find(int32_t a, int32_t b) const {
  if (count_ == 0) return nullptr;
  uint64_t k = key(a, b);
  size_t i = slot(k);
  while (true) {
    uint64_t cur = keys_[i];
    if (cur == k) return &values_[i];
    if (cur == ~0ull) return nullptr;
    i = (i + 1) & mask_;
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string_view> Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_span_.size() || id_span_[id].second == ~0u) return std::nullopt;
  return std::string_view(id_arena_).substr(id_span_[id].first, id_span_[id].second);
}

int32_t Bpe::char_id(std::string_view ch, bool first, bool last) const {
  if (!small_char_id_.empty()) {
    if (ch.size() <= 3) {
      size_t i = 0;
      char32_t c = next_code_point(ch, i);
      if (c < kSmallChars) return small_char_id_[c];
    }
    return vocab_.find(ch);
  }
  std::string s;
  if (!first) s += prefix_;
  s += ch;
  if (last) s += suffix_;
  return vocab_.find(s);
}

void Bpe::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  thread_local std::vector<Symbol> syms;
  syms.clear();
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, n + 1, true});
  };
  // unk run being built: (id, pending) — fused runs become one unk
  bool unk_pending = false;
  size_t i = 0;
  while (i < w.size()) {
    size_t b = i;
    i += std::min(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
    std::string_view ch = w.substr(b, i - b);
    int32_t id = char_id(ch, b == 0, i == w.size());
    if (id >= 0) {
      if (unk_pending) add(*unk_id_);
      unk_pending = false;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : ch) all &= byte_ids_[c] >= 0;
      if (all) {
        if (unk_pending) add(*unk_id_);
        unk_pending = false;
        for (unsigned char c : ch) add(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_) {
      if (unk_pending && !fuse_unk_) add(*unk_id_);
      unk_pending = true;
    }
  }
  if (unk_pending) add(*unk_id_);
  if (syms.empty()) return;
  syms.back().next = -1;

  struct Merge {
    int32_t rank, pos, new_id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Merge> heap;
  heap.clear();
  auto push = [&](Merge m) {
    heap.push_back(m);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t k = 0; k + 1 < syms.size(); ++k) {
    if (const MergeValue* mv = merges_.find(syms[k].id, syms[k + 1].id))
      heap.push_back({mv->rank, static_cast<int32_t>(k), mv->new_id});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Merge top = heap.back();
    heap.pop_back();
    Symbol& cur = syms[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = syms[cur.next];
    const MergeValue* mv = merges_.find(cur.id, right.id);
    if (!mv || mv->new_id != top.new_id) continue;  // a stale entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) syms[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeValue* pm = merges_.find(syms[cur.prev].id, cur.id))
        push({pm->rank, cur.prev, pm->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeValue* nm = merges_.find(cur.id, syms[cur.next].id)) push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : syms)
    if (s.alive) out.push_back(s.id);
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  Pieces p;
  p.buf.assign(word);
  p.spans.push_back({0, word.size(), true});
  tokenize_all(p, out);
}

void Bpe::tokenize_all(const Pieces& pieces, std::vector<int32_t>& out) const {
  struct Miss {
    std::string_view word;
    uint64_t hash;
    size_t begin, end;  // its ids in out
  };
  std::vector<Miss> misses;
  // Misses go into the cache in batches so repeated words within one long text hit it too.
  auto flush = [&] {
    std::unique_lock lock(cache_mutex_);
    for (const Miss& m : misses) cache_.insert(m.word, m.hash, out.data() + m.begin, m.end - m.begin);
    misses.clear();
  };
  size_t k = 0;
  const size_t n = pieces.spans.size();
  while (k < n) {
    {
      std::shared_lock lock(cache_mutex_);
      const bool full = cache_.full();
      for (; k < n && misses.size() < 64; ++k) {
        std::string_view word = pieces.view(pieces.spans[k]);
        if (ignore_merges_) {
          if (int32_t id = vocab_.find(word); id >= 0) {
            out.push_back(id);
            continue;
          }
        }
        const bool cacheable = word.size() < kMaxCachedWordBytes;
        uint64_t h = cacheable ? hash_bytes(word) : 0;
        if (cacheable && cache_.find(word, h, out)) continue;
        size_t start = out.size();
        merge_word(word, out);
        if (cacheable && !full) misses.push_back({word, h, start, out.size()});
      }
    }
    if (!misses.empty()) flush();
  }
}

}  // namespace tern::text
