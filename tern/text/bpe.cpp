// BPE: vocab and merges loading, the heap-based merge loop (as tokenizers' Word::merge_all) and
// the per-word cache.
#include "tern/text/bpe.h"

#include <cstring>
#include <algorithm>

#include "tern/base/error.h"
#include "tern/text/json_scan.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

constexpr size_t kMaxCachedWordBytes = 256;  // longer words are merged every time
// Code points below this resolve through a table: byte-level characters, most alphabets, '▁'.
constexpr char32_t kSmallChars = 0x3000;

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

std::unique_ptr<Bpe> Bpe::from_json(const Json& m, const JsonPath& p, std::string_view raw_vocab,
                                    std::string_view raw_merges) {
  if (!m.is_object()) p.fail("an object", m);
  std::string type = get_string(m, "type", p, "BPE");
  if (type != "BPE") (p / "type").fail("a supported model type (BPE)", "unsupported model type '" + type + "'");
  auto bpe = std::unique_ptr<Bpe>(new Bpe());

  int64_t max_id = -1;
  auto add_token = [&](std::string_view tok, int64_t id) {
    if (id < 0 || id > INT32_MAX) (p / "vocab" / tok).fail("a non-negative integer id", std::to_string(id));
    bpe->vocab_.insert(tok, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  };
  if (!raw_vocab.empty()) {
    bpe->vocab_.reserve(raw_vocab.size() / 12 + 1);
    std::vector<std::pair<std::string, int64_t>> batch;
    auto flush = [&] {
      for (const auto& [tok, id] : batch) bpe->vocab_.prefetch(hash_bytes(tok));
      for (const auto& [tok, id] : batch) add_token(tok, id);
      batch.clear();
    };
    scan_vocab(raw_vocab, p / "vocab", [&](std::string_view tok, int64_t id) {
      batch.emplace_back(tok, id);
      if (batch.size() == 16) flush();
    });
    flush();
  } else {
    const Json& vocab = require(m, "vocab", p);
    if (!vocab.is_object()) (p / "vocab").fail("an object of token -> id", vocab);
    bpe->vocab_.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it->is_number_integer()) (p / "vocab" / it.key()).fail("a non-negative integer id", *it);
      add_token(it.key(), it->get<int64_t>());
    }
  }
  bpe->id_span_.assign(static_cast<size_t>(max_id + 1), {0u, ~0u});
  bpe->vocab_.for_each([&](std::string_view tok, int32_t id) {
    bpe->id_span_[id] = {static_cast<uint32_t>(bpe->id_arena_.size()), static_cast<uint32_t>(tok.size())};
    bpe->id_arena_.append(tok);
  });

  bpe->byte_fallback_ = get_bool(m, "byte_fallback", p, false);
  bpe->fuse_unk_ = get_bool(m, "fuse_unk", p, false);
  bpe->ignore_merges_ = get_bool(m, "ignore_merges", p, false);
  bpe->prefix_ = get_string(m, "continuing_subword_prefix", p);
  bpe->suffix_ = get_string(m, "end_of_word_suffix", p);
  std::string unk = get_string(m, "unk_token", p);
  if (!unk.empty()) {
    if (int32_t id = bpe->vocab_.find(unk); id >= 0) bpe->unk_id_ = id;
  }
  for (int b = 0; b < 256; ++b) bpe->byte_ids_[b] = bpe->vocab_.find(fmt::format("<0x{:02X}>", b));
  if (bpe->prefix_.empty() && bpe->suffix_.empty()) {
    bpe->small_char_id_.assign(kSmallChars, -1);
    for (char32_t c = 0; c < kSmallChars; ++c) {
      if (c >= 0xD800 && c < 0xE000) continue;
      std::string s;
      append_utf8(s, c);
      bpe->small_char_id_[c] = bpe->vocab_.find(s);
    }
  }

  // Merges are resolved in batches: hashing and prefetching 3 x kBatch table slots first hides
  // most of the cache misses of the lookups (the vocab table is larger than the caches).
  constexpr size_t kBatch = 16;
  size_t n_merges = 0, pending = 0;
  std::string part_a[kBatch], part_b[kBatch], joined[kBatch];
  auto resolve = [&] {
    uint64_t ha[kBatch], hb[kBatch], hj[kBatch];
    for (size_t k = 0; k < pending; ++k) {
      ha[k] = hash_bytes(part_a[k]);
      hb[k] = hash_bytes(part_b[k]);
      hj[k] = hash_bytes(joined[k]);
      bpe->vocab_.prefetch(ha[k]);
      bpe->vocab_.prefetch(hb[k]);
      bpe->vocab_.prefetch(hj[k]);
    }
    int32_t ia[kBatch], ib[kBatch], ij[kBatch];
    for (size_t k = 0; k < pending; ++k) {
      size_t index = n_merges - pending + k;
      auto lookup = [&](const std::string& tok, uint64_t h) {
        int32_t id = bpe->vocab_.find(tok, h);
        if (id < 0) (p / "merges").at(index).fail("merge parts that are in the vocab", "'" + tok + "'");
        return id;
      };
      ia[k] = lookup(part_a[k], ha[k]);
      ib[k] = lookup(part_b[k], hb[k]);
      ij[k] = lookup(joined[k], hj[k]);
      bpe->merges_.prefetch(ia[k], ib[k]);
    }
    for (size_t k = 0; k < pending; ++k)
      bpe->merges_.set(ia[k], ib[k], {static_cast<int32_t>(n_merges - pending + k), ij[k]});
    pending = 0;
  };
  auto add_merge = [&](std::string_view a, std::string_view b) {
    part_a[pending].assign(a);
    part_b[pending].assign(b);
    joined[pending].assign(a);
    joined[pending].append(b.substr(std::min(bpe->prefix_.size(), b.size())));
    ++pending;
    ++n_merges;
    if (pending == kBatch) resolve();
  };
  if (!raw_merges.empty()) {
    bpe->merges_.reserve(raw_merges.size() / 16 + 1);  // a guess; the map grows as needed
    scan_merges(raw_merges, p / "merges", add_merge);
  } else if (m.contains("merges") && !m["merges"].is_null()) {
    const Json& merges = m["merges"];
    if (!merges.is_array()) (p / "merges").fail("an array", merges);
    bpe->merges_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const Json& e = merges[i];
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos) (p / "merges").at(i).fail("a merge \"a b\"", "'" + s + "'");
        add_merge(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        add_merge(e[0].get_ref<const std::string&>(), e[1].get_ref<const std::string&>());
      } else {
        (p / "merges").at(i).fail("a merge \"a b\" or [\"a\", \"b\"]", e);
      }
    }
  }
  resolve();
  return bpe;
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
