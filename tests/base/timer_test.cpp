// Every (tern/base/timer.h): a progress line's pace.
#include "tern/base/timer.h"

#include <gtest/gtest.h>

#include <thread>

namespace tern {
namespace {

TEST(Every, IsDueOnceItsIntervalHasPassedAndThenWaitsAgain) {
  Every never(1e9);
  EXPECT_FALSE(never.due());
  Every always(0.0);
  EXPECT_TRUE(always.due());
  EXPECT_TRUE(always.due());
  Every soon(0.5);  // wide enough that a loaded test machine's stalls do not make it due early
  EXPECT_FALSE(soon.due());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_TRUE(soon.due());
  EXPECT_FALSE(soon.due());  // the interval starts again from the line just logged
}

}  // namespace
}  // namespace tern
