// Regular expressions for tokenizer.json patterns on PCRE2 (UTF + UCP, JIT), with Oniguruma's
// meaning of \s and \w, which is what Hugging Face tokenizers compiles them with.
#pragma once
#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::text {

// An immutable compiled pattern; copies share it and matching is thread-safe.
class Regex {
 public:
  // Compiles a regex; throws tern::Error naming the pattern and PCRE2's message when it is invalid.
  static Regex pattern(std::string_view pattern);
  // Compiles a pattern that matches s literally.
  static Regex literal(std::string_view s);

  // Byte ranges [start, end) of the non-overlapping matches in text (valid UTF-8), left to right.
  // An empty match right where the previous match ended is skipped, as Oniguruma's iterator does.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  struct Code;

 private:
  std::shared_ptr<const Code> code_;
};

// Rewrites \s, \S, \w, \W in an Oniguruma pattern into explicit PCRE2 classes (exposed for tests).
std::string translate_onig_pattern(std::string_view pattern);

}  // namespace tern::text
