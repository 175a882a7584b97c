// UTF-8 helpers for the Jinja runtime: Python-style code point indexing, whitespace and case
// mapping. Invalid bytes count as one character each so any byte string round-trips.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tern::text::jinja {

// Decodes the character starting at s[pos] into cp; returns its byte length (>= 1).
// An invalid or truncated sequence yields its first byte as cp with length 1.
size_t utf8_decode(std::string_view s, size_t pos, char32_t& cp);
void utf8_append(std::string& out, char32_t cp);

// Byte offset of every character start, plus s.size() at the end.
std::vector<size_t> char_offsets(std::string_view s);
size_t char_count(std::string_view s);

// Python's str.isspace() for one code point.
bool is_space(char32_t cp);
// Python's str.strip/lstrip/rstrip: chars == nullptr strips whitespace, otherwise any code point of *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

// Case mapping for ASCII, Latin-1, Greek and Cyrillic (what chat templates meet); other scripts pass through.
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
bool is_cased_letter(char32_t cp);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

// Python's str.splitlines() (keepends=False).
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace tern::text::jinja
