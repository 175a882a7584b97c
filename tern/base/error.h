// Errors: TERN_CHECK throws tern::Error for bad input or data; TERN_ASSERT aborts on a broken
// invariant. Messages follow "[component] expected X, got Y".
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace tern {

// The one exception type library code throws for bad input, bad data or a failed resource.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace tern

// TERN_CHECK(cond, "[op] expected {}, got {}", a, b): throws tern::Error with the formatted message.
#define TERN_CHECK(cond, ...)                                  \
  do {                                                         \
    if (!(cond)) [[unlikely]] {                                \
      throw ::tern::Error(::fmt::format(__VA_ARGS__));         \
    }                                                          \
  } while (0)

// TERN_THROW("...", args): unconditional TERN_CHECK.
#define TERN_THROW(...) throw ::tern::Error(::fmt::format(__VA_ARGS__))

// TERN_ASSERT(cond, "...", args): a broken invariant (a bug in tern), never bad user input.
#define TERN_ASSERT(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond)) [[unlikely]] {                                                     \
      ::tern::assert_fail(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__));   \
    }                                                                               \
  } while (0)
