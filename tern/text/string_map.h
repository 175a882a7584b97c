// Hash maps keyed by std::string that accept std::string_view lookups without allocating.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tern::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace tern::text
