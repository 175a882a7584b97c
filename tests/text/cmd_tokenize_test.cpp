// `tern tokenize` end to end (skipped when the CLI binary is not built).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = std::string(TERN_BIN) + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  r.status = pclose(f);
  return r;
}

const std::string kDemo = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";

#define REQUIRE_CLI() \
  if (!std::filesystem::exists(TERN_BIN)) GTEST_SKIP() << "the tern CLI is not built"

TEST(CmdTokenize, Text) {
  REQUIRE_CLI();
  auto r = run("tokenize " + kDemo + " --text 'The jury said'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "{\"ids\":[330,502,1133,591]}\n");
  r = run("tokenize " + kDemo + " --text 'The jury said' --decode --add-special");
  EXPECT_EQ(r.out, "{\"ids\":[330,502,1133,591],\"decoded\":\"The jury said\"}\n");
}

TEST(CmdTokenize, Jsonl) {
  REQUIRE_CLI();
  std::string path = (std::filesystem::temp_directory_path() / "tern_cmd_tokenize_test.jsonl").string();
  {
    std::ofstream f(path);
    f << "{\"text\": \"The jury said\"}\n{\"text\": \"\"}\n";
  }
  auto r = run("tokenize " + kDemo + " --jsonl " + path);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "{\"ids\":[330,502,1133,591]}\n{\"ids\":[]}\n");
  {
    std::ofstream f(path);
    f << "{\"txt\": 1}\n";
  }
  r = run("tokenize " + kDemo + " --jsonl " + path);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("line 1"), std::string::npos) << r.out;
  std::filesystem::remove(path);
}

TEST(CmdTokenize, Errors) {
  REQUIRE_CLI();
  EXPECT_NE(run("tokenize " + kDemo).status, 0);
  EXPECT_NE(run("tokenize /nonexistent --text x").status, 0);
}


// --bench counts the same tokens as a plain encode and hashes them (FNV-1a over little-endian ids).
TEST(CmdTokenize, Bench) {
  REQUIRE_CLI();
  std::string path = (std::filesystem::temp_directory_path() / "tern_cmd_tokenize_bench.txt").string();
  {
    std::ofstream f(path);
    f << "The jury said";
  }
  auto r = run("tokenize " + kDemo + " --bench " + path + " --repeats 2");
  EXPECT_EQ(r.status, 0) << r.out;
  uint64_t h = 1469598103934665603ull;
  for (uint32_t id : {330u, 502u, 1133u, 591u})
    for (int b = 0; b < 4; ++b) h = (h ^ ((id >> (8 * b)) & 0xff)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  EXPECT_NE(r.out.find("\"tokens\":4,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string("\"ids_fnv1a\":\"") + hex + "\""), std::string::npos) << r.out;
  r = run("tokenize " + kDemo + " --bench " + path + " --repeats 0");
  EXPECT_NE(r.status, 0);
  std::filesystem::remove(path);
}

}  // namespace
