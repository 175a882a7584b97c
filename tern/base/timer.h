// Wall-clock timing for progress reports and benchmarks.
#pragma once
#include <chrono>

namespace tern {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// A progress line's pace: due() is true once `seconds` have passed since construction or since it was
// last true (long work logs where it stands every few seconds, and short work never).
class Every {
 public:
  explicit Every(double seconds) : seconds_(seconds) {}
  bool due() {
    if (clock_.seconds() < seconds_) return false;
    clock_.reset();
    return true;
  }

 private:
  Timer clock_;
  double seconds_;
};

}  // namespace tern
