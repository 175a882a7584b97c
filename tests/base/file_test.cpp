// base/file: read_file's errors, and write_file_atomic's all-or-nothing replacement of a file.
#include "tern/base/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>


namespace tern {
namespace {

namespace fs = std::filesystem;

// An empty directory of the test's own under the system's temporary directory, removed afterwards.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((fs::temp_directory_path() / ("tern_file_" + name + "_" + std::to_string(::getpid()))).string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

int entries(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(WriteFileAtomic, WritesEveryPieceInOrderAndReplacesTheOldFile) {
  const TempDir tmp("replace");
  const std::string& dir = tmp.path;
  const std::string path = dir + "/out.bin";
  write_file_atomic(path, "test", [](const WriteBytes& write) { write("old contents", 12); });
  EXPECT_EQ(read_file(path, "test"), "old contents");
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  write_file_atomic(path, "test", [&](const WriteBytes& write) {
    write("head:", 5);
    write(big.data(), big.size());
    write("", 0);
    write(":tail", 5);
  });
  EXPECT_EQ(read_file(path, "test"), "head:" + big + ":tail");
  EXPECT_EQ(entries(dir), 1) << "no temporary file is left beside it";
}

TEST(WriteFileAtomic, AFailingFillLeavesTheOldFileAndNoTemporaryFile) {
  const TempDir tmp("fail");
  const std::string& dir = tmp.path;
  const std::string path = dir + "/out.bin";
  write_file_atomic(path, "test", [](const WriteBytes& write) { write("kept", 4); });
  const std::string msg = message_of([&] {
    write_file_atomic(path, "test", [](const WriteBytes& write) {
      write("partial", 7);
      throw std::runtime_error("fill failed");
    });
  });
  EXPECT_EQ(msg, "fill failed");
  EXPECT_EQ(read_file(path, "test"), "kept");
  EXPECT_EQ(entries(dir), 1);
}

TEST(WriteFileAtomic, AMissingDirectoryIsOneClearError) {
  const TempDir tmp("missing");
  const std::string& dir = tmp.path;
  const std::string path = dir + "/no/such/dir/out.bin";
  const std::string msg = message_of([&] { write_file_atomic(path, "area", [](const WriteBytes&) {}); });
  EXPECT_NE(msg.find("[area] " + path + ": expected to create"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir), 0);
}

TEST(WriteFileAtomic, ATargetThatIsADirectoryIsOneClearErrorAndNothingIsLeft) {
  const TempDir tmp("isdir");
  const std::string& dir = tmp.path;
  const std::string path = dir + "/target";
  fs::create_directories(path + "/inside");
  const std::string msg = message_of([&] { write_file_atomic(path, "area", [](const WriteBytes& w) { w("x", 1); }); });
  EXPECT_NE(msg.find("[area] " + path + ": expected to rename the finished file into place"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_directory(path + "/inside"));
  EXPECT_EQ(entries(dir), 1) << "the temporary file is removed";
}

// A file that reports a size of 0 but has content (procfs) is read whole, as `cat` reads it.
TEST(ReadFile, AProcfsFileOfSizeZeroIsReadWhole) {
  const std::string text = read_file("/proc/self/status", "test");
  EXPECT_NE(text.find("Name:"), std::string::npos) << text.size() << " bytes";
  EXPECT_NE(text.find("Pid:"), std::string::npos);
}

// A regular file is read exactly, and an empty one as empty.
TEST(ReadFile, ARegularFileIsReadExactly) {
  TempDir dir("read_exact");
  const std::string path = dir.path + "/f";
  std::string want(10000, '\0');
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>('a' + i % 26);
  write_file_atomic(path, "test", [&](const WriteBytes& w) { w(want.data(), want.size()); });
  EXPECT_EQ(read_file(path, "test"), want);
  write_file_atomic(path, "test", [&](const WriteBytes&) {});
  EXPECT_EQ(read_file(path, "test"), "");
}

TEST(ReadFile, AMissingFileNamesTheAreaAndPath) {
  const TempDir tmp("read");
  const std::string path = tmp.path + "/absent.txt";
  const std::string msg = message_of([&] { read_file(path, "area"); });
  EXPECT_NE(msg.find("[area] " + path + ": expected a readable file, got"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tern
