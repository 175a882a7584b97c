// next_code_point against a decoder written from the Unicode Standard's table of well-formed byte
// sequences (Table 3-7) with U+FFFD for each maximal subpart: every string of one or two bytes, every
// three-byte string that starts with a lead byte, and four-byte strings over every lead, second and
// third byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tern/text/unicode.h"

namespace tern::text {
namespace {

struct Range {
  unsigned char lo, hi;
};
// The rows of Table 3-7: the byte ranges of each well-formed sequence.
const std::vector<std::vector<Range>> kRows = {
    {{0x00, 0x7F}},
    {{0xC2, 0xDF}, {0x80, 0xBF}},
    {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
    {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
    {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
    {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
};

// One step of the reference: the longest prefix at s[i] that some row admits; a whole row decodes to
// its code point, anything shorter is U+FFFD over that prefix (at least one byte).
char32_t reference_step(const std::string& s, size_t& i) {
  size_t best = 0;
  const std::vector<Range>* whole = nullptr;
  for (const auto& row : kRows) {
    size_t k = 0;
    while (k < row.size() && i + k < s.size()) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < row[k].lo || b > row[k].hi) break;
      ++k;
    }
    if (k > best) best = k;
    if (k == row.size()) whole = &row;
  }
  if (!whole) {
    i += best > 0 ? best : 1;
    return kReplacementChar;
  }
  const size_t len = whole->size();
  const auto b0 = static_cast<unsigned char>(s[i]);
  char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return c;
}

// Decodes s both ways and returns where they first differ ("" when they agree).
std::string compare(const std::string& s) {
  size_t i = 0, j = 0;
  while (i < s.size() || j < s.size()) {
    if (i >= s.size() || j >= s.size()) return "one decoder stopped early";
    const size_t at = i;
    const char32_t got = next_code_point(s, i), want = reference_step(s, j);
    if (got != want || i != j) {
      return "at byte " + std::to_string(at) + ": got U+" + std::to_string(got) + " to " + std::to_string(i) +
             ", want U+" + std::to_string(want) + " to " + std::to_string(j);
    }
  }
  return "";
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789ABCDEF";
  std::string h;
  for (char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    h += d[b >> 4], h += d[b & 15], h += ' ';
  }
  return h;
}

TEST(Utf8, EveryShortStringDecodesAsTheStandardsTable) {
  int failures = 0;
  auto check = [&](const std::string& s) {
    const std::string why = compare(s);
    if (!why.empty() && ++failures <= 5) ADD_FAILURE() << hex(s) << why;
  };
  for (int a = 0; a < 256; ++a) {
    check(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) check({static_cast<char>(a), static_cast<char>(b)});
  }
  for (int a = 0xC0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c = 0; c < 256; ++c) check({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
    }
  }
  const int last[] = {0x00, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xE1, 0xF1, 0xFF};
  for (int a = 0xF0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c = 0; c < 256; ++c) {
        for (int d : last) {
          check({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c), static_cast<char>(d)});
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace tern::text
