// BPE: vocab and merges loading, the heap-based merge loop (as tokenizers' Word::merge_all) and
// the per-word cache.
#include "tern/text/bpe.h"

#include <cstring>
#include <queue>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

constexpr size_t kCacheCapacity = 1 << 17;   // words kept; later new words are not cached
constexpr size_t kMaxCachedWordBytes = 256;  // longer words are merged every time

}  // namespace

size_t StringHash::operator()(std::string_view s) const noexcept {
  // FNV-1a over 8-byte words: fast on the short keys BPE looks up.
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 32));
}

void Bpe::MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, ~0ull);
  values_.assign(cap, {0, 0});
  mask_ = cap - 1;
}

void Bpe::MergeMap::set(int32_t a, int32_t b, MergeValue v) {
  TERN_ASSERT(count_ * 2 < keys_.size(), "merge map over capacity");
  uint64_t k = key(a, b);
  size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;
  while (keys_[i] != ~0ull && keys_[i] != k) i = (i + 1) & mask_;
  if (keys_[i] == ~0ull) ++count_;
  keys_[i] = k;
  values_[i] = v;
}

const Bpe::MergeValue* Bpe::MergeMap::find(int32_t a, int32_t b) const {
  uint64_t k = key(a, b);
  size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;
  while (true) {
    uint64_t cur = keys_[i];
    if (cur == k) return &values_[i];
    if (cur == ~0ull) return nullptr;
    i = (i + 1) & mask_;
  }
}

std::unique_ptr<Bpe> Bpe::from_json(const Json& m, const JsonPath& p) {
  if (!m.is_object()) p.fail("an object", m);
  std::string type = get_string(m, "type", p, "BPE");
  if (type != "BPE") (p / "type").fail("a supported model type (BPE)", "unsupported model type '" + type + "'");
  auto bpe = std::unique_ptr<Bpe>(new Bpe());
  const Json& vocab = require(m, "vocab", p);
  if (!vocab.is_object()) (p / "vocab").fail("an object of token -> id", vocab);
  bpe->vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX)
      (p / "vocab" / it.key()).fail("a non-negative integer id", *it);
    int32_t id = it->get<int32_t>();
    bpe->vocab_[it.key()] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  bpe->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  bpe->has_id_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [tok, id] : bpe->vocab_) {
    bpe->id_to_token_[id] = tok;
    bpe->has_id_[id] = 1;
  }

  bpe->byte_fallback_ = get_bool(m, "byte_fallback", p, false);
  bpe->fuse_unk_ = get_bool(m, "fuse_unk", p, false);
  bpe->ignore_merges_ = get_bool(m, "ignore_merges", p, false);
  bpe->prefix_ = get_string(m, "continuing_subword_prefix", p);
  bpe->suffix_ = get_string(m, "end_of_word_suffix", p);
  std::string unk = get_string(m, "unk_token", p);
  if (!unk.empty()) {
    if (auto it = bpe->vocab_.find(unk); it != bpe->vocab_.end()) bpe->unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bpe->vocab_.find(fmt::format("<0x{:02X}>", b));
    bpe->byte_ids_[b] = it == bpe->vocab_.end() ? -1 : it->second;
  }
  if (bpe->prefix_.empty() && bpe->suffix_.empty()) {
    bpe->small_char_id_.assign(0x800, -1);
    for (char32_t c = 0; c < 0x800; ++c) {
      std::string s;
      append_utf8(s, c);
      if (auto it = bpe->vocab_.find(s); it != bpe->vocab_.end()) bpe->small_char_id_[c] = it->second;
    }
  }

  const Json& merges = require(m, "merges", p);
  if (!merges.is_array()) (p / "merges").fail("an array", merges);
  bpe->merges_.reserve(merges.size());
  auto lookup = [&](const std::string& tok, const JsonPath& at) {
    auto it = bpe->vocab_.find(tok);
    if (it == bpe->vocab_.end()) at.fail("merge parts that are in the vocab", "'" + tok + "'");
    return it->second;
  };
  std::string a, b;
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& e = merges[i];
    JsonPath at = (p / "merges").at(i);
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) at.fail("a merge \"a b\"", "'" + s + "'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      at.fail("a merge \"a b\" or [\"a\", \"b\"]", e);
    }
    int32_t ia = lookup(a, at), ib = lookup(b, at);
    size_t strip = std::min(bpe->prefix_.size(), b.size());
    int32_t merged = lookup(a + b.substr(strip), at);
    bpe->merges_.set(ia, ib, {static_cast<int32_t>(i), merged});
  }
  return bpe;
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

int32_t Bpe::char_id(std::string_view ch, bool first, bool last) const {
  if (!small_char_id_.empty()) {
    if (ch.size() <= 2) {
      size_t i = 0;
      char32_t c = next_code_point(ch, i);
      if (c < 0x800) return small_char_id_[c];
    }
    auto it = vocab_.find(ch);
    return it == vocab_.end() ? -1 : it->second;
  }
  std::string s;
  if (!first) s += prefix_;
  s += ch;
  if (last) s += suffix_;
  auto it = vocab_.find(s);
  return it == vocab_.end() ? -1 : it->second;
}

void Bpe::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(w.size());
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
  std::vector<Merge> heap_storage;
  heap_storage.reserve(syms.size() * 2);
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(heap_storage));
  for (size_t k = 0; k + 1 < syms.size(); ++k) {
    if (const MergeValue* mv = merges_.find(syms[k].id, syms[k + 1].id))
      queue.push({mv->rank, static_cast<int32_t>(k), mv->new_id});
  }
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
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
        queue.push({pm->rank, cur.prev, pm->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeValue* nm = merges_.find(cur.id, syms[cur.next].id)) queue.push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : syms)
    if (s.alive) out.push_back(s.id);
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

}  // namespace tern::text
