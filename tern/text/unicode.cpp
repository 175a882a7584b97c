// UTF-8 decoding with Rust's lossy rules, character properties via ICU, normalization via ICU's
// unorm2 API, and the GPT-2 byte map.
#include "tern/text/unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <array>
#include <cstring>
#include <vector>

#include "tern/base/error.h"

namespace tern::text {

namespace {

inline bool is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

// A lead byte gives the sequence's length and the range its second byte must fall in (narrower after
// E0, ED, F0 and F4: no overlong forms, surrogates or code points past U+10FFFF); a sequence that breaks
// off after k bytes is one replacement character for those k bytes (the maximal subpart, as Rust does).
char32_t next_code_point(std::string_view s, size_t& i) {
  const size_t n = s.size();
  const unsigned char c0 = static_cast<unsigned char>(s[i]);
  if (c0 < 0x80) {
    ++i;
    return c0;
  }
  int len = 0;
  char32_t c = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    len = 2, c = c0 & 0x1F;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    len = 3, c = c0 & 0x0F;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    len = 4, c = c0 & 0x07;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    ++i;
    return kReplacementChar;
  }
  for (int k = 1; k < len; ++k) {
    const unsigned char ck = i + k < n ? static_cast<unsigned char>(s[i + k]) : 0;
    const bool ok = i + k < n && (k == 1 ? ck >= lo && ck <= hi : is_cont(ck));
    if (!ok) {
      i += k;
      return kReplacementChar;
    }
    c = (c << 6) | (ck & 0x3F);
  }
  i += len;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII eight bytes at a time: tokenizer.json files are mostly ASCII between their tokens.
    uint64_t w;
    if (i + 8 <= s.size() && (std::memcpy(&w, s.data() + i, 8), (w & 0x8080808080808080ull) == 0)) {
      i += 8;
      continue;
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t start = i;
    char32_t c = next_code_point(s, i);
    // A genuine U+FFFD is three bytes; an error yields fewer consumed bytes or other bytes.
    if (c == kReplacementChar && !(i - start == 3 && s.compare(start, 3, "\xEF\xBF\xBD") == 0)) return false;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = next_code_point(s, i);
    if (c == kReplacementChar)
      append_utf8(out, c);
    else
      out.append(s.data() + start, i - start);
  }
  return out;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || is_numeric(c);
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
         t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
         t == U_OTHER_PUNCTUATION;
}

bool is_nonspacing_mark(char32_t c) {
  return c >= 0x300 && u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool is_combining_mark(char32_t c) {
  if (c < 0x300) return false;
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED || t == U_PRIVATE_USE_CHAR;
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>((c >= 'A' && c <= 'Z') ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // the one unconditional multi-code-point lowercase mapping
    out += 'i';
    append_utf8(out, 0x307);
    return;
  }
  append_utf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
}

std::string normalize(std::string_view s, NormalForm f) {
  bool ascii = true;
  for (char ch : s) ascii &= static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(s);
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2* norm = nullptr;
  switch (f) {
    case NormalForm::kNFC: norm = unorm2_getNFCInstance(&st); break;
    case NormalForm::kNFD: norm = unorm2_getNFDInstance(&st); break;
    case NormalForm::kNFKC: norm = unorm2_getNFKCInstance(&st); break;
    case NormalForm::kNFKD: norm = unorm2_getNFKDInstance(&st); break;
  }
  TERN_CHECK(U_SUCCESS(st), "[text] expected an ICU normalizer, got error {}", u_errorName(st));
  TERN_CHECK(s.size() < (1u << 30), "[text] expected text under 1 GiB to normalize, got {} bytes", s.size());
  std::vector<UChar> src(s.size() + 1);
  int32_t src_len = 0;
  u_strFromUTF8WithSub(src.data(), static_cast<int32_t>(src.size()), &src_len, s.data(),
                       static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &st);
  TERN_CHECK(U_SUCCESS(st), "[text] expected UTF-8 text to normalize, got ICU error {}", u_errorName(st));
  int32_t span = unorm2_spanQuickCheckYes(norm, src.data(), src_len, &st);
  if (U_SUCCESS(st) && span == src_len) return std::string(s);
  st = U_ZERO_ERROR;
  // Normalized text can grow (NFKD up to 18x per code point); ICU reports the size it needs.
  std::vector<UChar> dst(static_cast<size_t>(src_len) * 2 + 16);
  int32_t dst_len = unorm2_normalize(norm, src.data(), src_len, dst.data(), static_cast<int32_t>(dst.size()), &st);
  if (st == U_BUFFER_OVERFLOW_ERROR) {
    st = U_ZERO_ERROR;
    dst.resize(static_cast<size_t>(dst_len) + 1);
    dst_len = unorm2_normalize(norm, src.data(), src_len, dst.data(), static_cast<int32_t>(dst.size()), &st);
  }
  TERN_CHECK(U_SUCCESS(st), "[text] expected normalizable text, got ICU error {}", u_errorName(st));
  std::string out(static_cast<size_t>(dst_len) * 3 + 4, '\0');
  int32_t out_len = 0;
  u_strToUTF8WithSub(out.data(), static_cast<int32_t>(out.size()), &out_len, dst.data(), dst_len, 0xFFFD, nullptr,
                     &st);
  TERN_CHECK(U_SUCCESS(st), "[text] expected UTF-16 to convert back, got ICU error {}", u_errorName(st));
  out.resize(static_cast<size_t>(out_len));
  return out;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 324> from_char{};  // byte-level characters are all below U+0144
  ByteMap() {
    from_char.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_char[b], c);
      from_char[c] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const std::string& byte_char(uint8_t b) { return byte_map().to_char[b]; }

int char_byte(char32_t c) { return c < 324 ? byte_map().from_char[c] : -1; }

}  // namespace tern::text
