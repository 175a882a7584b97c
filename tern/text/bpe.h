// The BPE model of tokenizer.json: byte-level (GPT-2 / Qwen / Llama 3) and SentencePiece-style
// (byte_fallback, unk_token, fuse_unk), merges as "a b" strings or [a, b] pairs, ignore_merges,
// continuing_subword_prefix / end_of_word_suffix. Merging is heap based; words are cached.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tern/text/json_util.h"
#include "tern/text/string_map.h"
#include "tern/text/pre_tokenizers.h"
#include "tern/text/token_table.h"
#include "tern/text/word_cache.h"

namespace tern::text {

class Bpe {
 public:
  // Builds the model from tokenizer.json's "model" object. raw_vocab / raw_merges, when not empty,
  // are the JSON text of model.vocab / model.merges (then the object's own are ignored). Throws
  // tern::Error naming the field for a non-BPE model, a malformed vocab or a merge whose parts are
  // not in the vocab.
  static std::unique_ptr<Bpe> from_json(const Json& model, const JsonPath& p, std::string_view raw_vocab = {},
                                        std::string_view raw_merges = {});

  // Appends the ids of one pre-tokenized piece to out. Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  // Appends the ids of every piece, in order (one cache lock for all of them). Thread-safe.
  void tokenize_all(const Pieces& pieces, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocab string of id, or nullopt when the model has no such id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  // Largest id in the vocab + 1.
  int64_t size() const { return static_cast<int64_t>(id_span_.size()); }

 private:
  // Code points below this resolve through a table: byte-level characters, most alphabets, '▁'.
  static constexpr char32_t kSmallChars = 0x3000;
  struct MergeValue {
    int32_t rank, new_id;
  };
  // Open-addressing map from an id pair to its merge; built once, read-only afterwards.
  class MergeMap {
   public:
    void reserve(size_t n);
    void set(int32_t a, int32_t b, MergeValue v);
    const MergeValue* find(int32_t a, int32_t b) const;
    void prefetch(int32_t a, int32_t b) const {
      if (keys_.empty()) return;
      size_t i = slot(key(a, b));
      __builtin_prefetch(&keys_[i]);
      __builtin_prefetch(&values_[i]);
    }

   private:
    size_t slot(uint64_t k) const { return (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_; }
    static uint64_t key(int32_t a, int32_t b) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    std::vector<uint64_t> keys_;
    std::vector<MergeValue> values_;
    size_t mask_ = 0, count_ = 0;
  };

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t char_id(std::string_view ch, bool first, bool last) const;

  TokenTable vocab_;
  std::string id_arena_;                      // the token strings, by id
  std::vector<std::pair<uint32_t, uint32_t>> id_span_;  // id -> (offset, length); length ~0u: no token
  MergeMap merges_;
  std::vector<int32_t> small_char_id_;  // small code point -> id, when no prefix/suffix is set
  int32_t byte_ids_[256];
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;

  mutable std::shared_mutex cache_mutex_;
  mutable WordCache cache_;
};

}  // namespace tern::text
