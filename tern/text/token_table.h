// A read-mostly string -> id table for vocabularies: one arena for the strings and an
// open-addressing index of (hash, offset, length, id), so a lookup touches one or two cache lines.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::text {

// 64-bit hash of a byte string (multiply-xorshift over 8-byte words).
uint64_t hash_bytes(std::string_view s);

class TokenTable {
 public:
  // Prepares for about n entries.
  void reserve(size_t n);
  // Maps s to id (a later insert of the same string replaces the id).
  void insert(std::string_view s, int32_t id);
  // The id of s, or -1.
  int32_t find(std::string_view s) const { return find(s, hash_bytes(s)); }
  int32_t find(std::string_view s, uint64_t h) const;
  // Hints the cache line find(s, h) will read first (for batched lookups).
  void prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }
  size_t size() const { return count_; }
  // Calls fn(string, id) for every entry.
  template <class F>
  void for_each(F&& fn) const {
    for (const Slot& sl : slots_)
      if (sl.id >= 0) fn(std::string_view(arena_).substr(sl.off, sl.len), sl.id);
  }

 private:
  // The first 8 key bytes live in the slot, so most keys compare without touching the arena.
  struct Slot {
    uint64_t prefix = 0;
    uint32_t hash = 0;
    int32_t id = -1;
    uint32_t off = 0, len = 0;
  };
  static uint64_t prefix_of(std::string_view s);
  bool same(const Slot& sl, std::string_view s, uint32_t h32, uint64_t prefix) const;
  void grow();
  std::string arena_;
  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
};

}  // namespace tern::text
