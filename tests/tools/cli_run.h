// Runs the tern CLI for the tools tests: exit code, stdout and stderr of `tern ARGS`.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace tern::testing {

struct CliRun {
  int code;         // exit status; -1 when the process did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` is passed through the shell. ctest runs several tests at once: each call gets its own
// stderr file (process id and a per-process counter).
inline CliRun tern_cli(const std::string& args) {
  static std::atomic<int> calls{0};
  const std::string err_path =
      ::testing::TempDir() + "/tern_cli_stderr_" + std::to_string(getpid()) + "_" + std::to_string(++calls) + ".txt";
  FILE* p = popen((std::string(TERN_BIN) + " " + args + " 2>" + err_path).c_str(), "r");
  CliRun r{-1, "", ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::remove(err_path.c_str());
  return r;
}

}  // namespace tern::testing
