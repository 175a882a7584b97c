// WordCache: linear probing over a table twice the word capacity.
#include "tern/text/word_cache.h"

#include <cstring>

namespace tern::text {

WordCache::WordCache(size_t max_words) : max_words_(max_words) {
  size_t cap = 16;
  while (cap < max_words * 2) cap <<= 1;
  mask_ = cap - 1;
  slots_.resize(cap);
}

bool WordCache::find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
  size_t i = h & mask_;
  while (true) {
    const Slot& s = slots_[i];
    if (s.ids_len == ~0u) return false;
    if (s.hash == h && s.key_len == word.size() && std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
      out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
      return true;
    }
    i = (i + 1) & mask_;
  }
}

void WordCache::insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
  if (full() || keys_.size() + word.size() >= UINT32_MAX || ids_.size() + n >= UINT32_MAX) return;
  size_t i = h & mask_;
  while (slots_[i].ids_len != ~0u) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.key_len == word.size() && std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0)
      return;
    i = (i + 1) & mask_;
  }
  slots_[i] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
               static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)};
  keys_.append(word);
  ids_.insert(ids_.end(), ids, ids + n);
  ++count_;
}

}  // namespace tern::text
