// base/host_memory: the MemAvailable line of /proc/meminfo texts, good and bad, and this host's value.
#include "tern/base/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tern/base/error.h"

namespace tern {
namespace {

TEST(HostMemory, ParsesTheMemAvailableLine) {
  const std::string text =
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   12288000 kB\nBuffers: 1 kB\n";
  EXPECT_EQ(parse_mem_available(text), int64_t{12288000} * 1024);
  EXPECT_EQ(parse_mem_available("MemAvailable:\t0 kB"), 0);  // last line, no newline, tab
}

// A key that only ends with MemAvailable, a missing line, a bad number or unit: one clear error each.
TEST(HostMemory, MissingOrMalformedLinesGetOneError) {
  auto error_of = [](const std::string& text) {
    try {
      parse_mem_available(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("MemTotal: 1 kB\n").find("expected a line \"MemAvailable: N kB\", got none"), std::string::npos);
  EXPECT_NE(error_of("XMemAvailable: 5 kB\n").find("got none"), std::string::npos);
  for (const char* bad : {"MemAvailable: 12 MB\n", "MemAvailable: -3 kB\n", "MemAvailable: kB\n",
                          "MemAvailable: 12 kB extra\n", "MemAvailable: 99999999999999999999 kB\n"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("[memory] /proc/meminfo: expected a line"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("got 'MemAvailable:"), std::string::npos) << bad << ": " << e;
  }
}

// This host's value lies between 0 and its MemTotal (read here by a naive scan of the same file).
TEST(HostMemory, ThisHostsValueIsWithinItsTotal) {
  std::ifstream in("/proc/meminfo");
  ASSERT_TRUE(in) << "no /proc/meminfo";
  std::string key, unit;
  int64_t total_kib = -1, value = 0;
  while (in >> key >> value >> unit) {
    if (key == "MemTotal:") total_kib = value;
  }
  ASSERT_GT(total_kib, 0);
  const int64_t avail = host_available_memory();
  EXPECT_GT(avail, 0);
  EXPECT_LE(avail, total_kib * 1024);
}

}  // namespace
}  // namespace tern
