// Thread-pool facade over OpenMP: parallel_for splits [0, n) into contiguous blocks across threads.
#pragma once
#include <omp.h>

#include <cstdint>

namespace tern {

int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) on disjoint blocks covering [0, n); runs inline when n < grain or one thread.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int nt = num_threads();
  if (nt <= 1 || n < 2 * grain) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num();
    int T = omp_get_num_threads();
    int64_t chunk = (n + T - 1) / T;
    int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) fn(b, e);
  }
}

}  // namespace tern
