// The launch rule of backend/cuda (launch_kernel.cuh): every launch goes through launch_kernel, which
// allows programmatic dependent launch, so every kernel must begin with grid_dependency_wait() — a
// kernel that touched memory before it could read its predecessor's output before it is written. The
// one exception is named: statements that call a function whose name ends in _before_wait (which reads
// only what its caller promised was written earlier) may come first.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The names of the __global__ functions in src whose body does not begin with grid_dependency_wait().
std::vector<std::string> kernels_without_wait(const std::string& src) {
  std::vector<std::string> bad;
  const std::regex first_stmt(R"(^\{\s*(?:[^;{}]*\b\w+_before_wait\b[^;{}]*;\s*)*grid_dependency_wait\(\);)");
  for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) {
    const size_t open = src.find('{', at);
    if (open == std::string::npos) break;
    if (std::regex_search(src.substr(open, 512), first_stmt)) continue;
    // the name: the identifier before the last top-level '(' (after __launch_bounds__(...), if any)
    std::string name;
    int depth = 0;
    for (size_t i = at; i < open; ++i) {
      if (src[i] == '(' && depth++ == 0) {
        size_t b = i;
        while (b > at && (std::isalnum(static_cast<unsigned char>(src[b - 1])) || src[b - 1] == '_')) --b;
        name = src.substr(b, i - b);
      } else if (src[i] == ')') {
        --depth;
      }
    }
    bad.push_back(name);
  }
  return bad;
}

// Launches that bypass launch_kernel (the triple-chevron syntax).
bool has_chevron_launch(const std::string& src) { return src.find("<<<") != std::string::npos; }

TEST(KernelLaunch, EveryKernelWaitsForItsPredecessorFirst) {
  const fs::path root = TERN_SOURCE_DIR;
  int kernels = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "tern")) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cu" && ext != ".cuh" && ext != ".h" && ext != ".cpp")) continue;
    const std::string src = read_all(e.path()), rel = fs::relative(e.path(), root).generic_string();
    for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) ++kernels;
    for (const std::string& k : kernels_without_wait(src))
      ADD_FAILURE() << rel << ": kernel " << k << " does not begin with grid_dependency_wait()";
    EXPECT_FALSE(has_chevron_launch(src)) << rel << " launches a kernel with <<< >>>: use launch_kernel";
  }
  EXPECT_GT(kernels, 20);
}

TEST(KernelLaunch, RuleCatchesViolations) {
  EXPECT_EQ(kernels_without_wait("__global__ void k(int* p) {\n  grid_dependency_wait();\n  *p = 1;\n}").size(), 0u);
  const auto bad = kernels_without_wait("template <int N>\n__global__ void __launch_bounds__(128) late(int* p) {\n  *p = 1;\n"
                                        "  grid_dependency_wait();\n}");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0], "late");
  // Named pre-wait calls may come first; any other statement may not.
  EXPECT_EQ(kernels_without_wait("__global__ void k(A a) {\n  const int n = stage_before_wait<T, 4>(a);\n"
                                 "  grid_dependency_wait();\n}").size(), 0u);
  EXPECT_EQ(kernels_without_wait("__global__ void k(A a) {\n  const int n = stage_before_wait(a);\n  *a.p = n;\n"
                                 "  grid_dependency_wait();\n}").size(), 1u);
  EXPECT_EQ(kernels_without_wait("__global__ void k(A a) {\n  const int n = stage(a);\n  grid_dependency_wait();\n}")
                .size(), 1u);
  EXPECT_TRUE(has_chevron_launch("k<<<1, 32, 0, s>>>(p);"));
  EXPECT_FALSE(has_chevron_launch("launch_kernel(k, 1, 32, 0, s, p);"));
}

}  // namespace
