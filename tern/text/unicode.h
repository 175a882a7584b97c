// UTF-8 helpers, the Unicode character properties the tokenizer pipeline uses (with Rust's
// `char` semantics, as Hugging Face tokenizers does), normalization forms and the GPT-2 byte map.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tern::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point at s[i] and advances i. An ill-formed sequence yields kReplacementChar
// and advances past its maximal subpart (at least one byte), as Rust's from_utf8_lossy does.
char32_t next_code_point(std::string_view s, size_t& i);

// Length in bytes of the UTF-8 sequence a lead byte starts (1 for a stray or invalid byte).
inline size_t utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? (lead < 0xC0 ? 1 : 2) : lead < 0xF0 ? 3 : 4;
}

// Appends the UTF-8 encoding of c (c must be a scalar value).
void append_utf8(std::string& out, char32_t c);

// True when s is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

// s with every ill-formed subsequence replaced by U+FFFD (Rust from_utf8_lossy).
std::string utf8_lossy(std::string_view s);

// Character properties with the meaning of Rust's char methods.
bool is_whitespace(char32_t c);    // White_Space
bool is_alphanumeric(char32_t c);  // Alphabetic or N*
bool is_numeric(char32_t c);       // Nd, Nl, No
bool is_punctuation(char32_t c);   // ASCII punctuation or P*
bool is_nonspacing_mark(char32_t c);  // Mn
bool is_combining_mark(char32_t c);   // Mn, Mc, Me
bool is_control(char32_t c);       // Cc, Cf, Cn, Co (Bert's definition, minus \t \n \r)
bool is_cjk(char32_t c);           // the CJK blocks BertNormalizer pads with spaces

// Appends the full lowercase mapping of c (U+0130 lowercases to two code points).
void append_lowercase(std::string& out, char32_t c);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// s in normalization form f. s must be valid UTF-8.
std::string normalize(std::string_view s, NormalForm f);

// GPT-2's byte <-> printable character map: byte b is written as the UTF-8 string byte_char(b).
const std::string& byte_char(uint8_t b);

// The byte a byte-level character stands for, or -1 when c is not one.
int char_byte(char32_t c);

}  // namespace tern::text
