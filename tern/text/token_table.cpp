// TokenTable: arena + linear-probing index.
#include "tern/text/token_table.h"

#include <algorithm>
#include <cstring>

#include "tern/base/error.h"

namespace tern::text {

uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t k = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * k);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 29);
}

uint64_t TokenTable::prefix_of(std::string_view s) {
  uint64_t w = 0;
  std::memcpy(&w, s.data(), std::min<size_t>(s.size(), 8));
  return w;
}

bool TokenTable::same(const Slot& sl, std::string_view s, uint32_t h32, uint64_t prefix) const {
  if (sl.hash != h32 || sl.len != s.size() || sl.prefix != prefix) return false;
  return s.size() <= 8 || std::memcmp(arena_.data() + sl.off + 8, s.data() + 8, s.size() - 8) == 0;
}

void TokenTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (const Slot& sl : old) {
    if (sl.id < 0) continue;
    size_t i = sl.hash & mask_;  // the low 32 hash bits index tables up to 2^32 slots
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = sl;
  }
}

void TokenTable::grow() { reserve(std::max<size_t>(count_ * 2, 16)); }

void TokenTable::insert(std::string_view s, int32_t id) {
  TERN_ASSERT(id >= 0, "token ids are non-negative");
  if ((count_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_bytes(s);
  uint32_t h32 = static_cast<uint32_t>(h);
  uint64_t prefix = prefix_of(s);
  size_t i = h & mask_;
  while (slots_[i].id >= 0) {
    if (same(slots_[i], s, h32, prefix)) {
      slots_[i].id = id;
      return;
    }
    i = (i + 1) & mask_;
  }
  TERN_CHECK(arena_.size() + s.size() < UINT32_MAX, "[tokenizer] expected a vocab under 4 GiB, got more");
  slots_[i] = {prefix, h32, id, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size())};
  arena_.append(s);
  ++count_;
}

int32_t TokenTable::find(std::string_view s, uint64_t h) const {
  if (slots_.empty()) return -1;
  uint32_t h32 = static_cast<uint32_t>(h);
  uint64_t prefix = prefix_of(s);
  size_t i = h & mask_;
  while (true) {
    const Slot& sl = slots_[i];
    if (sl.id < 0) return -1;
    if (same(sl, s, h32, prefix)) return sl.id;
    i = (i + 1) & mask_;
  }
}

}  // namespace tern::text
