// Thread count for tern's own loops (TERN_THREADS or OpenMP's default).
#include "tern/base/parallel.h"

#include <atomic>
#include <cstdlib>

namespace tern {
namespace {
std::atomic<int>& threads_ref() {
  static std::atomic<int> n{[] {
    const char* v = std::getenv("TERN_THREADS");
    int t = v ? std::atoi(v) : 0;
    return t > 0 ? t : omp_get_max_threads();
  }()};
  return n;
}
}  // namespace

int num_threads() { return threads_ref().load(std::memory_order_relaxed); }
void set_num_threads(int n) { threads_ref().store(n > 0 ? n : omp_get_max_threads()); }

}  // namespace tern
