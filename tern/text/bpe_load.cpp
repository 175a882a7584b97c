// Bpe::from_json: the vocab table and the merge map from tokenizer.json's "model". Given the raw
// JSON of vocab and merges, a second thread scans the merges (and hashes their parts) while this
// one builds the vocab table; the merge parts then resolve to ids in two halves at once.
#include <algorithm>
#include <future>

#include "tern/base/error.h"
#include "tern/text/bpe.h"
#include "tern/text/json_scan.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

// Every merge as text: its parts a and b and the merged token, in one arena, with their hashes.
class MergeTexts {
 public:
  explicit MergeTexts(std::string prefix) : prefix_(std::move(prefix)) {}
  void reserve(size_t bytes, size_t n) {
    arena_.reserve(bytes);
    entries_.reserve(n);
  }
  void add(std::string_view a, std::string_view b) {
    std::string_view tail = b.substr(std::min(prefix_.size(), b.size()));
    TERN_CHECK(arena_.size() + 2 * (a.size() + b.size()) < UINT32_MAX, "[tokenizer] expected merges under 4 GiB, got more");
    Entry e{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(a.size()), static_cast<uint32_t>(b.size()),
            static_cast<uint32_t>(a.size() + tail.size()), {}};
    arena_.append(a).append(b).append(a).append(tail);
    for (int k = 0; k < 3; ++k) e.hash[k] = hash_bytes(part(e, k));
    entries_.push_back(e);
  }
  size_t size() const { return entries_.size(); }
  // Part k of merge i: 0 = a, 1 = b, 2 = the merged token.
  std::string_view part(size_t i, int k) const { return part(entries_[i], k); }
  uint64_t hash(size_t i, int k) const { return entries_[i].hash[k]; }

 private:
  struct Entry {
    uint32_t off, la, lb, lj;
    uint64_t hash[3];
  };
  std::string_view part(const Entry& e, int k) const {
    std::string_view s(arena_);
    if (k == 0) return s.substr(e.off, e.la);
    if (k == 1) return s.substr(e.off + e.la, e.lb);
    return s.substr(e.off + e.la + e.lb, e.lj);
  }
  std::string prefix_, arena_;
  std::vector<Entry> entries_;
};

MergeTexts scan_raw_merges(std::string_view raw, const JsonPath& p, const std::string& prefix) {
  MergeTexts t(prefix);
  t.reserve(raw.size() * 2, raw.size() / 12);
  scan_merges(raw, p, [&](std::string_view a, std::string_view b) { t.add(a, b); });
  return t;
}

MergeTexts dom_merges(const Json& m, const JsonPath& p, const std::string& prefix) {
  MergeTexts t(prefix);
  if (!m.contains("merges") || m["merges"].is_null()) return t;
  const Json& merges = m["merges"];
  if (!merges.is_array()) p.fail("an array", merges);
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& e = merges[i];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) p.at(i).fail("a merge \"a b\"", "'" + s + "'");
      t.add(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      t.add(e[0].get_ref<const std::string&>(), e[1].get_ref<const std::string&>());
    } else {
      p.at(i).fail("a merge \"a b\" or [\"a\", \"b\"]", e);
    }
  }
  return t;
}

// ids[3 i + k] = vocab id of part k of merge i, for i in [lo, hi). Returns the first 3 i + k whose
// part is not in the vocab, or SIZE_MAX. Lookups go in batches: prefetching the table slots of a
// batch first hides most cache misses (the vocab table is larger than the caches).
size_t resolve_parts(const TokenTable& vocab, const MergeTexts& t, size_t lo, size_t hi, int32_t* ids) {
  constexpr size_t kBatch = 16;
  for (size_t b0 = lo; b0 < hi; b0 += kBatch) {
    size_t b1 = std::min(hi, b0 + kBatch);
    for (size_t i = b0; i < b1; ++i)
      for (int k = 0; k < 3; ++k) vocab.prefetch(t.hash(i, k));
    for (size_t i = b0; i < b1; ++i) {
      for (int k = 0; k < 3; ++k) {
        int32_t id = vocab.find(t.part(i, k), t.hash(i, k));
        if (id < 0) return 3 * i + k;
        ids[3 * i + k] = id;
      }
    }
  }
  return SIZE_MAX;
}

}  // namespace

std::unique_ptr<Bpe> Bpe::from_json(const Json& m, const JsonPath& p, std::string_view raw_vocab,
                                    std::string_view raw_merges) {
  if (!m.is_object()) p.fail("an object", m);
  std::string type = get_string(m, "type", p, "BPE");
  if (type != "BPE") (p / "type").fail("a supported model type (BPE)", "unsupported model type '" + type + "'");
  auto bpe = std::unique_ptr<Bpe>(new Bpe());
  bpe->byte_fallback_ = get_bool(m, "byte_fallback", p, false);
  bpe->fuse_unk_ = get_bool(m, "fuse_unk", p, false);
  bpe->ignore_merges_ = get_bool(m, "ignore_merges", p, false);
  bpe->prefix_ = get_string(m, "continuing_subword_prefix", p);
  bpe->suffix_ = get_string(m, "end_of_word_suffix", p);

  // The merges' text: on a second thread when raw (declared after everything it reads, so an
  // exception below waits for it before those go away).
  const JsonPath merges_path = p / "merges";
  std::future<MergeTexts> raw_merge_texts;
  if (!raw_merges.empty())
    raw_merge_texts = std::async(std::launch::async, scan_raw_merges, raw_merges, std::cref(merges_path), bpe->prefix_);

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
  // The id table is dense: a vocabulary whose ids are mostly gaps is a damaged file, not a tokenizer.
  const int64_t n_tokens = static_cast<int64_t>(bpe->vocab_.size());
  if (max_id >= 2 * n_tokens + 65536) {
    (p / "vocab")
        .fail(fmt::format("ids below {} for its {} tokens", 2 * n_tokens + 65536, n_tokens),
              fmt::format("id {}", max_id));
  }
  bpe->id_span_.assign(static_cast<size_t>(max_id + 1), {0u, ~0u});
  bpe->vocab_.for_each([&](std::string_view tok, int32_t id) {
    bpe->id_span_[id] = {static_cast<uint32_t>(bpe->id_arena_.size()), static_cast<uint32_t>(tok.size())};
    bpe->id_arena_.append(tok);
  });

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

  const MergeTexts merges = raw_merges.empty() ? dom_merges(m, merges_path, bpe->prefix_) : raw_merge_texts.get();
  const size_t n = merges.size();
  std::vector<int32_t> ids(3 * n);
  size_t half = n / 2;
  auto upper = std::async(std::launch::async, resolve_parts, std::cref(bpe->vocab_), std::cref(merges), half, n,
                          ids.data());
  size_t bad = std::min(resolve_parts(bpe->vocab_, merges, 0, half, ids.data()), upper.get());
  if (bad != SIZE_MAX)
    merges_path.at(bad / 3).fail("merge parts that are in the vocab", "'" + std::string(merges.part(bad / 3, bad % 3)) + "'");

  bpe->merges_.reserve(n);
  constexpr size_t kBatch = 16;
  for (size_t b0 = 0; b0 < n; b0 += kBatch) {
    size_t b1 = std::min(n, b0 + kBatch);
    for (size_t i = b0; i < b1; ++i) bpe->merges_.prefetch(ids[3 * i], ids[3 * i + 1]);
    for (size_t i = b0; i < b1; ++i)
      bpe->merges_.set(ids[3 * i], ids[3 * i + 1], {static_cast<int32_t>(i), ids[3 * i + 2]});
  }
  return bpe;
}

}  // namespace tern::text
