// `tern info` counts each architecture's caches as they are: sliding layers capped at their window,
// KV-sharing layers at zero, recurrent layers at their fixed state, full layers per token under the
// storage kind; expected numbers derived here from the fixtures' config.json. And `tern score` runs
// the Gemma 4 fixture with quantized caches (TurboQuant's deferred read on its full layers, the affine
// ring on its sliding ones).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"

#include "cli_run.h"

namespace {

using tern::testing::CliRun;
using tern::testing::tern_cli;

std::string fixture(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

nlohmann::json text_config(const std::string& name) {
  std::ifstream f(fixture(name) + "/config.json");
  nlohmann::json j = nlohmann::json::parse(f);
  return j.contains("text_config") ? j["text_config"] : j;
}

nlohmann::json info(const std::string& name, int64_t context, const std::string& extra = "") {
  CliRun r = tern_cli("info " + fixture(name) + " --device cpu --json --context " + std::to_string(context) + " " + extra);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// Bytes of one stored head row of dim d: plain f32 on the CPU; affine: d*bits/8 codes and an f16
// scale and bias per group; TurboQuant k8: d int8 keys and an f16 scale and zero point per 32,
// v3 values d*3/8 bytes and an f16 RMS per 32.
int64_t row_bytes(const std::string& kind, bool key, int64_t d, int64_t group) {
  if (kind == "bf16") return 4 * d;
  if (kind == "affine8" || kind == "affine4") return d * (kind == "affine8" ? 8 : 4) / 8 + 4 * (d / group);
  return key ? d + 4 * (d / 32) : d * 3 / 8 + 2 * (d / 32);
}

struct Expected {
  int64_t full_per_token = 0, sliding_fixed = 0;  // sliding: bytes once the window is full
};

// Gemma 4: layers past n_layer - num_kv_shared_layers own no cache; per_layer_config overrides
// head_dim; sliding layers keep sliding_window positions (affine kinds quantize them, TurboQuant not).
Expected gemma4_expected(const std::string& kind, int64_t group) {
  const nlohmann::json c = text_config("gemma4");
  const int64_t n = c["num_hidden_layers"], shared = c["num_kv_shared_layers"], window = c["sliding_window"];
  Expected e;
  for (int64_t i = 0; i < n - shared; ++i) {
    const bool full = c["layer_types"][i] == "full_attention";
    int64_t d = c["head_dim"], heads = c["num_key_value_heads"];
    const std::string key = std::to_string(i);
    if (c.contains("per_layer_config") && c["per_layer_config"].contains(key)) {
      d = c["per_layer_config"][key].value("head_dim", d);
      heads = c["per_layer_config"][key].value("num_key_value_heads", heads);
    }
    const std::string k = !full && kind.rfind("turbo", 0) == 0 ? "bf16" : kind;
    const int64_t per = heads * (row_bytes(k, true, d, group) + row_bytes(k, false, d, group));
    if (full) e.full_per_token += per;
    else e.sliding_fixed += per * window;
  }
  return e;
}

TEST(KVLayoutCli, Gemma4SlidingLayersStopAtTheirWindowAndSharedLayersHoldNothing) {
  for (const std::string kind : {"bf16", "affine8", "affine4", "turbo"}) {
    SCOPED_TRACE(kind);
    const std::string flags = "--kv-cache " + kind + " --kv-group 32";
    const Expected e = gemma4_expected(kind, 32);
    const nlohmann::json a = info("gemma4", 1000, flags), b = info("gemma4", 2000, flags);
    ASSERT_TRUE(a.contains("kv_bytes_at_context") && b.contains("kv_bytes_at_context"));
    EXPECT_EQ(a["kv_bytes_at_context"].get<int64_t>(), e.sliding_fixed + 1000 * e.full_per_token);
    EXPECT_EQ(b["kv_bytes_at_context"].get<int64_t>() - a["kv_bytes_at_context"].get<int64_t>(), 1000 * e.full_per_token);
    EXPECT_EQ(a["kv_bytes_at_context_by_kind"]["sliding"].get<int64_t>(), e.sliding_fixed);
    EXPECT_EQ(a["kv_bytes_per_token"].get<int64_t>(), e.full_per_token);
    EXPECT_EQ(a["cache_layers"]["shared"].get<int64_t>(), text_config("gemma4")["num_kv_shared_layers"].get<int64_t>());
    // below the window every owning layer grows per token
    const nlohmann::json s = info("gemma4", 10, flags);
    EXPECT_EQ(s["kv_bytes_at_context"].get<int64_t>(),
              10 * e.full_per_token + e.sliding_fixed / text_config("gemma4")["sliding_window"].get<int64_t>() * 10);
  }
  // the context that fits: the largest N with weights + caches(N) <= memory
  const nlohmann::json m = info("gemma4", 1000, "--memory 10MB");
  const Expected e = gemma4_expected("bf16", 32);
  const int64_t room = 10000000 - m["weight_bytes_loaded"].get<int64_t>();
  EXPECT_EQ(m["context_that_fits"].get<int64_t>(), (room - e.sliding_fixed) / e.full_per_token);
}

TEST(KVLayoutCli, Qwen35RecurrentStateIsConstant) {
  const nlohmann::json c = text_config("qwen3_5");
  const int64_t nk = c["linear_num_key_heads"], nv = c["linear_num_value_heads"], dk = c["linear_key_head_dim"],
                dv = c["linear_value_head_dim"], kernel = c.value("linear_conv_kernel_dim", 4);
  int64_t linear = 0, full = 0;
  for (const auto& t : c["layer_types"]) (t == "linear_attention" ? linear : full) += 1;
  // conv history (kernel - 1 positions of the q, k and v channels) and the [nv, dk, dv] state, f32
  const int64_t recurrent = linear * 4 * ((kernel - 1) * (2 * nk * dk + nv * dv) + nv * dk * dv);
  const int64_t per_token = full * c["num_key_value_heads"].get<int64_t>() * 2 * c["head_dim"].get<int64_t>() * 4;
  const nlohmann::json a = info("qwen3_5", 1000), b = info("qwen3_5", 2000);
  EXPECT_EQ(a["kv_bytes_at_context_by_kind"]["recurrent"].get<int64_t>(), recurrent);
  EXPECT_EQ(b["kv_bytes_at_context_by_kind"]["recurrent"].get<int64_t>(), recurrent);
  EXPECT_EQ(a["kv_bytes_at_context"].get<int64_t>(), recurrent + 1000 * per_token);
  EXPECT_EQ(b["kv_bytes_at_context"].get<int64_t>(), recurrent + 2000 * per_token);
  EXPECT_EQ(a["cache_layers"]["recurrent"].get<int64_t>(), linear);
}

TEST(KVLayoutCli, DenseModelsCountEveryLayerAsFullAttention) {
  const nlohmann::json c = text_config("qwen3");
  const int64_t per_token = c["num_hidden_layers"].get<int64_t>() * c["num_key_value_heads"].get<int64_t>() * 2 *
                            c.value("head_dim", c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>()) * 4;
  const nlohmann::json a = info("qwen3", 1000);
  EXPECT_EQ(a["kv_bytes_per_token"].get<int64_t>(), per_token);
  EXPECT_EQ(a["kv_bytes_at_context"].get<int64_t>(), 1000 * per_token);
}

// The fixture's 90-token prompt scored with each storage: it runs, quantization changes the logits,
// and the next-token argmax stays that of the unquantized cache at >= 90 % of the positions (the
// fixture's greedy top-2 margins are >= 5 logits, which the quantization noise should rarely cross).
TEST(KVLayoutCli, Gemma4ScoresWithQuantizedCaches) {
  std::ifstream f(fixture("gemma4") + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(f);
  std::string ids;
  for (const auto& prompt : ref["prompts"])
    if (prompt.size() == 90)
      for (const auto& t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
  ASSERT_FALSE(ids.empty()) << "expected a 90-token prompt in reference.json";
  auto logits = [&](const std::string& flags) {
    const std::string path = ::testing::TempDir() + "/tern_kvl_logits_" + std::to_string(getpid()) + ".safetensors";
    CliRun r = tern_cli("score " + fixture("gemma4") + " --ids " + ids + " --logits-out " + path + " " + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
    std::vector<float> out;
    if (r.code == 0) out = tern::io::SafetensorsFile::open(path)->get("logits").to_f32_vector();
    std::remove(path.c_str());
    return out;
  };
  // Chunked: a single forward would be read before anything is quantized (the first append never is).
  const std::vector<float> base = logits("--chunk 16");
  ASSERT_EQ(base.size() % 90, 0u);
  ASSERT_FALSE(base.empty());
  const size_t vocab = base.size() / 90;
  auto argmax = [vocab](const std::vector<float>& x, size_t row) {
    return std::max_element(x.begin() + row * vocab, x.begin() + (row + 1) * vocab) - (x.begin() + row * vocab);
  };
  for (const std::string flags :
       {"--chunk 16 --kv-cache turbo", "--chunk 16 --kv-cache turbo:k8v4", "--chunk 16 --kv-cache affine8 --kv-group 32",
        "--chunk 16 --kv-cache affine4 --kv-group 32", "--chunk 16 --kv-cache affine4 --kv-group 32 --kv-start 40",
        "--chunk 7 --kv-cache turbo", "--chunk 1 --kv-cache affine8 --kv-group 32"}) {
    const std::vector<float> q = logits(flags);
    ASSERT_EQ(q.size(), base.size()) << flags;
    int same = 0;
    double err = 0, ref2 = 0;
    for (size_t row = 0; row < 90; ++row) same += argmax(q, row) == argmax(base, row) ? 1 : 0;
    for (size_t i = 0; i < q.size(); ++i) err += double(q[i] - base[i]) * (q[i] - base[i]), ref2 += double(base[i]) * base[i];
    std::printf("[ info     ] gemma4 fixture %s: argmax agrees at %d/90, logit NMSE %.3g\n", flags.c_str(), same,
                err / ref2);
    EXPECT_GT(err, 0.0) << flags << ": the caches should have been quantized";
    EXPECT_GE(same, 81) << flags;
  }
}

}  // namespace
