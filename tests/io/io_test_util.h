// Helpers shared by the io tests: temp directories, raw file bytes, and error-message checks.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "tern/base/error.h"

namespace tern::io::testing_util {

// Removes this process's fresh_dir directories when the test program ends.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    const std::string mine = "tern_io_" + std::to_string(::getpid()) + "_";
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
      if (e.path().filename().string().rfind(mine, 0) == 0) std::filesystem::remove_all(e.path(), ec);
    }
  }
};
inline ::testing::Environment* const kTempDirCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

// A fresh, empty directory under the test temp dir, unique per test and call.
inline std::string fresh_dir(const std::string& tag) {
  static int counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path p = std::filesystem::path(::testing::TempDir()) /
                            ("tern_io_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
                             info->name() + "_" + tag + "_" + std::to_string(counter++));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The bytes of a safetensors file: 8-byte little-endian length (header.size() unless given), header, data.
inline std::string raw_safetensors(const std::string& header, const std::string& data = "", int64_t length = -1) {
  uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// Runs f, expects a tern::Error whose message contains every part; returns the message.
inline std::string expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const tern::Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tern::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected tern::Error, got no exception";
  return "";
}

}  // namespace tern::io::testing_util
