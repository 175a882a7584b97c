// The --kv-cache flags end to end: the demo model's perplexity and mean KL against the unquantized
// cache for each storage (bounds from the KV-cache issue: affine8 <= +0.5 %, affine4 <= +8 %,
// turbo:k8v4 <= +2.5 % and no worse than affine4, turbo (k8v3) <= +8 %; TurboQuant_mse keys k4v4 and
// k3v3 reported, within +8 %), `tern info`'s bytes per
// token, and one-line errors for bad values.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"

#include "cli_run.h"

namespace {

using tern::testing::CliRun;
using tern::testing::tern_cli;

const std::string kDemo = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";

struct Scored {
  double ppl = 0;
  tern::Tensor logits;  // [n, vocab]
};

Scored score(const std::string& kind) {
  const std::string path = ::testing::TempDir() + "/tern_kv_logits_" + std::to_string(getpid()) + "_" +
                           kind.substr(0, kind.find(':')) + (kind.find(':') != std::string::npos ? kind.substr(kind.find(':') + 1) : "") +
                           ".safetensors";
  CliRun r = tern_cli("score " + kDemo + " --text-file " + kDemo + "/valid.txt --max-tokens 2049 --chunk 256 --kv-cache " +
                      kind + " --logits-out " + path);
  EXPECT_EQ(r.code, 0) << kind << ": " << r.err;
  Scored s;
  if (r.code != 0) return s;
  s.ppl = nlohmann::json::parse(r.out)["perplexity"].get<double>();
  s.logits = tern::io::SafetensorsFile::open(path)->get("logits").clone();
  std::remove(path.c_str());
  return s;
}

// Mean over the scored positions (all but the last) of KL(p || q), in double.
double mean_kl(const tern::Tensor& p_logits, const tern::Tensor& q_logits) {
  const int64_t n = p_logits.size(0) - 1, v = p_logits.size(1);
  const float* p = p_logits.data<float>();
  const float* q = q_logits.data<float>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto log_softmax = [v](const float* x, std::vector<double>& out) {
      double mx = x[0], sum = 0;
      for (int64_t j = 1; j < v; ++j) mx = std::max(mx, double(x[j]));
      for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
      const double lse = mx + std::log(sum);
      out.resize(v);
      for (int64_t j = 0; j < v; ++j) out[j] = x[j] - lse;
    };
    std::vector<double> lp, lq;
    log_softmax(p + i * v, lp);
    log_softmax(q + i * v, lq);
    for (int64_t j = 0; j < v; ++j) total += std::exp(lp[j]) * (lp[j] - lq[j]);
  }
  return total / n;
}

TEST(KVCacheCli, DemoPerplexityWithinTheIssueBounds) {
  const Scored base = score("bf16");
  ASSERT_TRUE(base.logits.defined());
  EXPECT_NEAR(base.ppl, 76.10, 0.05);
  std::map<std::string, Scored> s;
  for (const char* kind : {"affine8", "affine4", "turbo:k8v4", "turbo", "turbo:k4v4", "turbo:k3v3"})
    s[kind] = score(kind);
  for (auto& [kind, r] : s) {
    ASSERT_TRUE(r.logits.defined()) << kind;
    std::printf("[ info     ] %-10s perplexity %.3f (%+.2f %%), mean KL vs bf16 %.3g\n", kind.c_str(), r.ppl,
                100 * (r.ppl / base.ppl - 1), mean_kl(base.logits, r.logits));
  }
  EXPECT_LE(s["affine8"].ppl, base.ppl * 1.005);
  EXPECT_LE(s["affine4"].ppl, base.ppl * 1.08);
  EXPECT_LE(s["turbo:k8v4"].ppl, base.ppl * 1.025);
  EXPECT_LE(s["turbo:k8v4"].ppl, s["affine4"].ppl);
  EXPECT_LE(s["turbo"].ppl, base.ppl * 1.08);
  // The storages are lossy: each moves the logits, the 8-bit one least.
  for (auto& [kind, r] : s) EXPECT_GT(mean_kl(base.logits, r.logits), 0.0) << kind;
  EXPECT_LT(mean_kl(base.logits, s["affine8"].logits), mean_kl(base.logits, s["affine4"].logits));
  EXPECT_LT(mean_kl(base.logits, s["turbo:k8v4"].logits), mean_kl(base.logits, s["turbo"].logits));
  // TurboQuant_mse keys (no bound in the issue): within turbo's +8 %, and each key bit fewer moves the
  // logits more than int8 keys under the same values.
  EXPECT_LE(s["turbo:k4v4"].ppl, base.ppl * 1.08);
  EXPECT_LE(s["turbo:k3v3"].ppl, base.ppl * 1.08);
  EXPECT_LT(mean_kl(base.logits, s["turbo:k8v4"].logits), mean_kl(base.logits, s["turbo:k4v4"].logits));
  EXPECT_LT(mean_kl(base.logits, s["turbo"].logits), mean_kl(base.logits, s["turbo:k3v3"].logits));
}

TEST(KVCacheCli, BoundaryAndStartKeepMoreUnquantized) {
  // With every layer in the boundary, or a start past the text, the quantized kind scores as bf16.
  auto ppl = [](const std::string& flags) {
    CliRun r = tern_cli("score " + kDemo + " --text-file " + kDemo + "/valid.txt --max-tokens 600 --chunk 256 " + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["perplexity"].get<double>() : 0.0;
  };
  const double base = ppl("--kv-cache bf16");
  EXPECT_EQ(ppl("--kv-cache turbo:k8v2 --kv-boundary 4"), base);
  EXPECT_EQ(ppl("--kv-cache turbo:k8v2 --kv-start 600"), base);
  EXPECT_NE(ppl("--kv-cache turbo:k8v2 --kv-start 512"), base);
}

TEST(KVCacheCli, InfoReportsBytesPerTokenAndTheContextThatFits) {
  // demo: 8 layers, 2 kv heads, head_dim 64; keys + values per layer and head
  const std::map<std::string, int64_t> per_head = {
      {"bf16", 2 * 64 * 4},           {"affine8", 2 * (64 + 4)},           {"affine4", 2 * (32 + 4)},
      {"turbo", (64 + 8) + (24 + 4)}, {"turbo:k8v4", (64 + 8) + (32 + 4)}, {"turbo:k4v4", (32 + 4) + (32 + 4)}};
  for (const auto& [kind, bytes] : per_head) {
    CliRun r = tern_cli("info " + kDemo + " --device cpu --json --memory 1GB --kv-cache " + kind);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), 8 * 2 * bytes) << kind;
    const int64_t w = j["weight_bytes_loaded"].get<int64_t>();
    EXPECT_EQ(j["context_that_fits"].get<int64_t>(), (1000000000 - w) / (8 * 2 * bytes)) << kind;
  }
  CliRun r = tern_cli("info " + kDemo + " --device cpu --json --kv-cache affine4 --kv-boundary 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kv_bytes_per_token"].get<int64_t>(), 2 * 2 * 512 + 6 * 2 * 2 * (32 + 4));
}

void expect_one_line_error(const std::string& args, const std::string& needle) {
  CliRun r = tern_cli(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
}

TEST(KVCacheCli, BadValuesGetOneLine) {
  const std::string score = "score " + kDemo + " --ids 1,2,3 ";
  expect_one_line_error(score + "--kv-cache int8", "[kv-cache] unsupported storage 'int8'");
  expect_one_line_error(score + "--kv-cache turbo:k5v3", "key bits 8, 4 or 3");
  expect_one_line_error(score + "--kv-cache turbo:k8v5", "value bits 2, 3, 4 or 8");
  expect_one_line_error(score + "--kv-cache affine4 --kv-group 48", "group of 32, 64 or 128");
  expect_one_line_error(score + "--kv-start -1", "non-negative start");
  expect_one_line_error(score + "--kv-boundary -2", "non-negative boundary");
  expect_one_line_error("generate " + kDemo + " --ids 1,2 --kv-cache affine2", "unsupported storage");
  expect_one_line_error("bench " + kDemo + " --kv-cache turbo:k8", "turbo:k<K>v<V>");
  expect_one_line_error("info " + kDemo + " --memory lots", "--memory");
  expect_one_line_error("info " + kDemo + " --memory inf", "--memory like 80GB");
  expect_one_line_error("info " + kDemo + " --memory 0x10GB", "--memory like 80GB");
  expect_one_line_error("info " + kDemo + " --memory 80gb", "--memory like 80GB");
  expect_one_line_error("info " + kDemo + " --memory 1e30GB", "at most 1 PiB");
}

// A memory smaller than the weights fits no context, and the line says why.
TEST(KVCacheCli, InfoSaysWhenTheWeightsAloneExceedTheMemory) {
  CliRun r = tern_cli("info " + kDemo + " --device cpu --memory 1MB");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fits         0 tokens of context in 1MB beside the weights (the weights alone take "),
            std::string::npos)
      << r.out;
  r = tern_cli("info " + kDemo + " --device cpu --memory 1GB");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("the weights alone take"), std::string::npos) << r.out;
}

// --memory device on the CPU: the host's MemAvailable, and the same context as that many bytes given.
TEST(KVCacheCli, InfoMemoryDeviceTakesTheHostsAvailableMemory) {
  CliRun r = tern_cli("info " + kDemo + " --device cpu --json --memory device --kv-cache affine4");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["memory_source"], "host MemAvailable");
  const double mem = d["memory_bytes"].get<double>();
  EXPECT_GT(mem, 0.0);
  CliRun g = tern_cli("info " + kDemo + " --device cpu --json --kv-cache affine4 --memory " +
                      std::to_string(static_cast<long long>(mem)) + "B");
  ASSERT_EQ(g.code, 0) << g.err;
  const nlohmann::json e = nlohmann::json::parse(g.out);
  EXPECT_EQ(e["memory_source"], "--memory");
  EXPECT_EQ(e["context_that_fits"], d["context_that_fits"]);
  EXPECT_GT(d["context_that_fits"].get<int64_t>(), 0);
  CliRun t = tern_cli("info " + kDemo + " --device cpu --memory device");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("(host MemAvailable) beside the weights (more than the model's 2048 positions)"),
            std::string::npos)
      << t.out;
}

TEST(KVCacheCli, GenerateAndBenchRunWithAQuantizedCache) {
  CliRun g = tern_cli("generate " + kDemo + " --ids 1,2,3,4 --max-tokens 8 --json --kv-cache turbo --prefill-chunk 2");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["ids"].size(), 8u);
  CliRun b = tern_cli("bench " + kDemo + " --prompt-tokens 16 --gen-tokens 4 --repeats 1 --warmup 0 --json --kv-cache affine4");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(b.out)["kv_cache"], "affine4");
}

}  // namespace

// A quantized storage whose --kv-boundary covers every attention layer of the demo model (8) still runs,
// unquantized, and says so once on stderr; a boundary that leaves one layer quantized says nothing.
TEST(KVCacheCli, BoundaryOverEveryLayerWarns) {
  const std::string score = "score " + kDemo + " --device cpu --ids 1,2,3,4 --kv-cache turbo --kv-boundary ";
  CliRun all = tern_cli(score + "4");
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.err.find("--kv-cache turbo stores no layer quantized: --kv-boundary 4"), std::string::npos) << all.err;
  EXPECT_NE(all.err.find("8 full-attention layers"), std::string::npos) << all.err;
  CliRun some = tern_cli(score + "3");
  ASSERT_EQ(some.code, 0) << some.err;
  EXPECT_EQ(some.err.find("stores no layer quantized"), std::string::npos) << some.err;
  CliRun plain = tern_cli("score " + kDemo + " --device cpu --ids 1,2,3,4 --kv-boundary 99");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("stores no layer quantized"), std::string::npos) << plain.err;
}
