// tern generate --prompt-cache-save / --prompt-cache end to end: greedy tokens continued from a saved
// prompt equal the tokens of one uninterrupted run (the demo model with bf16, affine4 and turbo caches,
// the transition before the save; the Qwen3.5 fixture's recurrent state; Gemma 4's rings, bf16 and affine, past their
// window of 16), and a foreign, mismatched, truncated or corrupted file or a prompt that does not
// start with the stored tokens exits non-zero with one line.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

using tern::testing::CliRun;
using tern::testing::tern_cli;

const std::string kDemo = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";
const std::string kQwen35 = std::string(TERN_TEST_DATA) + "/models/qwen3_5";
const std::string kGemma4 = std::string(TERN_TEST_DATA) + "/models/gemma4";

std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "/tern_pc_" + std::to_string(getpid()) + "_" + name + ".tpc";
}

std::string ids_arg(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

std::vector<int> range_ids(int first, int n, int step) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back((first + i * step) % 500 + 3);
  return v;
}

struct Generated {
  std::vector<int> ids;
  std::vector<float> logprobs;  // of each generated token: equal floats mean equal logits rows
  int64_t cached = -1;
};

Generated generate(const std::string& model, const std::vector<int>& prompt, const std::string& flags) {
  CliRun r = tern_cli("generate " + model + " --device cpu --threads 2 --json --max-tokens 10 --ids " + ids_arg(prompt) +
                      " " + flags);
  EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
  Generated g;
  if (r.code != 0) return g;
  nlohmann::json j = nlohmann::json::parse(r.out);
  g.ids = j["ids"].get<std::vector<int>>();
  g.logprobs = j["logprobs"].get<std::vector<float>>();
  g.cached = j["cached_tokens"].get<int64_t>();
  return g;
}

// Saves the caches of prompt, then continues (a) from exactly the saved prompt and (b) from the prompt
// plus a suffix; both must give the uninterrupted run's tokens and logprobs (the random fixtures'
// greedy tokens can repeat one id, their logprobs still see every cached position). The uninterrupted run of (b) prefills
// in chunks of |prompt| so its forwards cut where the continuation's do.
void expect_continuation(const std::string& model, const std::string& kv, const std::vector<int>& prompt,
                         const std::vector<int>& suffix) {
  SCOPED_TRACE(model + " " + kv);
  const std::string file = temp_file("cont");
  Generated saved = generate(model, prompt, kv + " --prompt-cache-save " + file);
  Generated whole = generate(model, prompt, kv);
  ASSERT_FALSE(whole.ids.empty());
  EXPECT_EQ(saved.ids, whole.ids);  // saving changes nothing
  EXPECT_EQ(saved.logprobs, whole.logprobs);
  Generated resumed = generate(model, prompt, kv + " --prompt-cache " + file);
  EXPECT_EQ(resumed.ids, whole.ids);
  EXPECT_EQ(resumed.logprobs, whole.logprobs);
  EXPECT_EQ(resumed.cached, static_cast<int64_t>(prompt.size()));

  std::vector<int> longer = prompt;
  longer.insert(longer.end(), suffix.begin(), suffix.end());
  Generated whole2 = generate(model, longer, kv + " --prefill-chunk " + std::to_string(prompt.size()));
  Generated resumed2 = generate(model, longer, kv + " --prompt-cache " + file);
  ASSERT_FALSE(whole2.ids.empty());
  EXPECT_EQ(resumed2.ids, whole2.ids);
  EXPECT_EQ(resumed2.logprobs, whole2.logprobs);
  EXPECT_EQ(resumed2.cached, static_cast<int64_t>(prompt.size()));
  std::remove(file.c_str());
}

TEST(PromptCacheCli, DemoModelContinuesIdenticallyForEachStorage) {
  const std::vector<int> prompt = range_ids(100, 24, 37), suffix = range_ids(7, 5, 11);
  for (const std::string kv : {"--kv-cache bf16", "--kv-cache affine4 --kv-start 8", "--kv-cache turbo --kv-start 8",
                               "--kv-cache affine8"})
    expect_continuation(kDemo, kv, prompt, suffix);
}

TEST(PromptCacheCli, RecurrentStateOfQwen35Continues) {
  expect_continuation(kQwen35, "", range_ids(40, 12, 13), range_ids(9, 4, 5));
}

TEST(PromptCacheCli, GemmaRingsPastTheirWindowContinue) {
  expect_continuation(kGemma4, "", range_ids(60, 21, 17), range_ids(3, 6, 29));
  // Affine storage on the sliding layers' rings too: converted at once, and converting after the wrap.
  for (const std::string kv : {"--kv-cache affine8 --kv-group 32", "--kv-cache affine4 --kv-group 32 --kv-start 30"})
    expect_continuation(kGemma4, kv, range_ids(60, 21, 17), range_ids(3, 6, 29));
}

void expect_one_line_error(const std::string& args, const std::string& needle) {
  CliRun r = tern_cli(args);
  EXPECT_NE(r.code, 0) << args;
  // One error line; a model's "[tern info]" load notes may precede it.
  int lines = 0;
  for (size_t at = 0; at < r.err.size();) {
    size_t end = r.err.find('\n', at);
    if (end == std::string::npos) end = r.err.size();
    if (r.err.compare(at, 11, "[tern info]") != 0) ++lines;
    at = end + 1;
  }
  EXPECT_EQ(lines, 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find("[prompt-cache]"), std::string::npos) << args << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

TEST(PromptCacheCli, BadFilesAndPromptsGetOneLine) {
  const std::vector<int> prompt = range_ids(100, 12, 37);
  const std::string file = temp_file("bad"), bad = temp_file("bad_copy");
  const std::string base = "generate " + kDemo + " --device cpu --threads 2 --max-tokens 2 --ids ";
  ASSERT_EQ(tern_cli(base + ids_arg(prompt) + " --kv-cache affine4 --max-tokens 0 --prompt-cache-save " + file).code, 0);

  // Another scheme, another model, another prompt.
  expect_one_line_error(base + ids_arg(prompt) + " --kv-cache bf16 --prompt-cache " + file, "differs from this run");
  expect_one_line_error(base + ids_arg(prompt) + " --kv-cache turbo --prompt-cache " + file, "kv:turboquant:k8v3");
  expect_one_line_error("generate " + kQwen35 + " --device cpu --max-tokens 2 --ids " + ids_arg(prompt) +
                            " --prompt-cache " + file,
                        "another model");
  std::vector<int> other = prompt;
  other[5] += 1;
  expect_one_line_error(base + ids_arg(other) + " --kv-cache affine4 --prompt-cache " + file,
                        "expected a prompt that starts with the file's 12 tokens");
  expect_one_line_error(base + ids_arg({prompt[0], prompt[1]}) + " --kv-cache affine4 --prompt-cache " + file,
                        "expected a prompt that starts with the file's 12 tokens");
  expect_one_line_error(base + ids_arg(prompt) + " --kv-cache affine4 --prompt-cache " + file + ".missing",
                        "expected a readable file");

  // Truncated at several points, and one flipped byte in the payload.
  const std::vector<char> good = read_file(file);
  ASSERT_GT(good.size(), 1000u);
  for (size_t cut : {size_t(10), size_t(100), good.size() / 2, good.size() - 1}) {
    write_file(bad, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)));
    expect_one_line_error(base + ids_arg(prompt) + " --kv-cache affine4 --prompt-cache " + bad, bad);
  }
  std::vector<char> flipped = good;
  flipped[good.size() - 100] ^= 0x04;
  write_file(bad, flipped);
  expect_one_line_error(base + ids_arg(prompt) + " --kv-cache affine4 --prompt-cache " + bad,
                        "payload checksum mismatch");
  write_file(bad, good);
  EXPECT_EQ(tern_cli(base + ids_arg(prompt) + " --kv-cache affine4 --prompt-cache " + bad).code, 0);
  std::remove(file.c_str());
  std::remove(bad.c_str());
}

}  // namespace
