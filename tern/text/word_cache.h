// The BPE word cache: word -> ids in one flat open-addressing table with arenas for keys and ids.
// Insert-only up to a fixed capacity (later words are not cached, as in tokenizers). Not
// synchronized: the owner locks (shared for find, exclusive for insert).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::text {

class WordCache {
 public:
  explicit WordCache(size_t max_words = 1 << 17);
  // Appends the cached ids of word (hash h = hash_bytes(word)) to out; false when absent.
  bool find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const;
  // Caches ids for word unless full or present.
  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n);
  bool full() const { return count_ >= max_words_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0, ids_off = 0, ids_len = ~0u;  // ids_len ~0u: empty slot
  };
  size_t max_words_, mask_, count_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
};

}  // namespace tern::text
