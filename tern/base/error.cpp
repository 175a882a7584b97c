// Abort path of TERN_ASSERT.
#include "tern/base/error.h"

#include <cstdio>
#include <cstdlib>

namespace tern {

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "tern: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::abort();
}

}  // namespace tern
