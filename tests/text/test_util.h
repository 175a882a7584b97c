// Shared helpers for the text tests: fixture locations, file reading, JSONL parsing.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace tern::text::test {

inline std::string data_dir() { return TERN_TEST_DATA; }

// The fetched third-party tokenizer directory for `name` (see scripts/fetch_tokenizers.sh).
inline std::string npm_dir(const std::string& name) { return data_dir() + "/tokenizers/npm/" + name; }

inline bool have_npm(const std::string& name) {
  return std::filesystem::exists(npm_dir(name) + "/tokenizer.json");
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace tern::text::test

#define TERN_REQUIRE_NPM(name)                                                                     \
  if (!::tern::text::test::have_npm(name))                                                         \
  GTEST_SKIP() << "tokenizer files for " << (name)                                                 \
               << " are not fetched; run scripts/fetch_tokenizers.sh to fetch the pinned npm files"
