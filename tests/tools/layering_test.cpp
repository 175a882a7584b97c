// The include-layering check of DESIGN.md §1: every tern/ and tools/ source includes only folders of a
// lower layer (or its own folder), text/ depends on base/ only, server/ sees engine/ (and base/core),
// and backend/cuda/kernels/ includes nothing from tern/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

namespace fs = std::filesystem;

namespace {

const std::map<std::string, int>& layers() {
  static const std::map<std::string, int> m = {
      {"base", 0}, {"core", 1}, {"ops", 2}, {"backend", 3}, {"autograd", 4}, {"io", 4}, {"text", 4}, {"sample", 4},
      {"state", 5}, {"layers", 6}, {"models", 7}, {"train", 8}, {"engine", 8}, {"server", 9}, {"tools", 10}};
  return m;
}

// "tern/state/x.h" -> "state"; "tools/cli/x.h" -> "tools"
std::string folder_of(const std::string& path) {
  if (path.rfind("tools/", 0) == 0) return "tools";
  if (path.rfind("tern/", 0) != 0) return "";
  auto rest = path.substr(5);
  return rest.substr(0, rest.find('/'));
}

std::string allowed(const std::string& from_path, const std::string& inc) {
  const std::string from = folder_of(from_path), to = folder_of(inc);
  if (to.empty()) return "";  // not a tern include
  if (from_path.find("tern/backend/cuda/kernels/") == 0)
    return inc.find("tern/backend/cuda/kernels/") == 0 ? "" : "kernels include nothing from tern/ but other kernels";
  if (!layers().count(from) || !layers().count(to)) return "unknown folder";
  if (from == to) return "";
  if (from == "text") return to == "base" ? "" : "text/ depends on base/ only";
  if (from == "server") return (to == "engine" || to == "base" || to == "core") ? "" : "server/ sees engine/ only";
  if (layers().at(to) >= layers().at(from)) return "layer " + std::to_string(layers().at(from)) + " includes layer " +
                                                   std::to_string(layers().at(to));
  return "";
}

TEST(Layering, IncludesFollowTheLayerTable) {
  const fs::path root = TERN_SOURCE_DIR;
  const std::regex inc_re(R"re(^\s*#\s*include\s*"([^"]+)")re");
  int files = 0;
  for (const char* top : {"tern", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      std::ifstream f(e.path());
      std::string line;
      int n = 0;
      while (std::getline(f, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, inc_re)) continue;
        std::string why = allowed(rel, m[1].str());
        EXPECT_TRUE(why.empty()) << rel << ":" << n << " includes " << m[1].str() << ": " << why;
      }
    }
  }
  EXPECT_GT(files, 10);
}

TEST(Layering, RuleCatchesViolations) {
  EXPECT_FALSE(allowed("tern/core/tensor.h", "tern/state/cache.h").empty());
  EXPECT_FALSE(allowed("tern/text/bpe.cpp", "tern/core/tensor.h").empty());
  EXPECT_FALSE(allowed("tern/server/http.cpp", "tern/models/model.h").empty());
  EXPECT_FALSE(allowed("tern/backend/cuda/kernels/x.cuh", "tern/base/error.h").empty());
  EXPECT_TRUE(allowed("tern/state/cache.h", "tern/ops/rope.h").empty());
  EXPECT_TRUE(allowed("tern/backend/cuda/kernels/x.cuh", "tern/backend/cuda/kernels/common.cuh").empty());
  EXPECT_TRUE(allowed("tools/cli/main.cpp", "tern/engine/generator.h").empty());
}

}  // namespace
