// End-to-end tests of the tern binary: the demo model's perplexity and greedy continuations against
// transformers' reference, the JSON outputs, and the one-line errors for bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/io/safetensors.h"

#include "cli_run.h"

namespace {

using tern::testing::CliRun;
CliRun tern(const std::string& args) { return tern::testing::tern_cli(args); }

const std::string kDemo = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";
const std::string kQwen3 = std::string(TERN_TEST_DATA) + "/models/qwen3";

nlohmann::json demo_reference() {
  std::ifstream f(kDemo + "/reference.json");
  return nlohmann::json::parse(f);
}

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

TEST(CliDemo, PerplexityMatchesTransformers) {
  const double want = demo_reference()["valid_first_2048_ppl"].get<double>();
  for (const char* chunk : {"0", "256", "auto"}) {  // auto: one forward (the demo's logits take 32 MiB)
    CliRun r = tern("score " + kDemo + " --text-file " + kDemo + "/valid.txt --max-tokens 2049 --chunk " + chunk);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["n_tokens"].get<int>(), 2049);
    EXPECT_NEAR(j["perplexity"].get<double>(), want, 0.05) << "chunk " << chunk;
    EXPECT_NEAR(want, 76.10, 0.01);
  }
}

// Past the trained context (the demo model's max_position_embeddings is 2,048) tern still runs, as
// transformers does, and says so once on stderr; up to it (2,049 scored tokens read 2,048 positions,
// as above) it says nothing.
TEST(CliDemo, WarnsPastTheTrainedContext) {
  CliRun r = tern("score " + kDemo + " --text-file " + kDemo + "/valid.txt --max-tokens 2050 --chunk 512");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[score] 2050 tokens take 2049 positions, past the model's max_position_embeddings of 2048"),
            std::string::npos)
      << r.err;
  r = tern("score " + kDemo + " --text-file " + kDemo + "/valid.txt --max-tokens 2049 --chunk 512");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
}

TEST(CliDemo, GreedyContinuationsMatchReference) {
  const nlohmann::json ref = demo_reference();
  ASSERT_EQ(ref["continuations"].size(), 4u);
  for (const auto& c : ref["continuations"]) {
    const auto prompt_ids = c["prompt_ids"].get<std::vector<int>>();
    const auto want = c["greedy_ids"].get<std::vector<int>>();
    CliRun r = tern("generate " + kDemo + " --ids " + join_ids(prompt_ids) + " --temperature 0 --json --max-tokens " +
                 std::to_string(want.size()));
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ids"].get<std::vector<int>>(), want) << c["prompt"];
    EXPECT_EQ(j["text"].get<std::string>(), c["greedy_text"].get<std::string>());
    EXPECT_GT(j["timings"]["generation_tokens_per_second"].get<double>(), 0.0);
  }
}

TEST(CliDemo, TextPromptStreamsTheSameTextAsJson) {
  const nlohmann::json ref = demo_reference();
  const auto c = ref["continuations"][0];
  CliRun streamed = tern("generate " + kDemo + " \"" + c["prompt"].get<std::string>() + "\" --temperature 0 --max-tokens 32");
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  EXPECT_EQ(streamed.out, c["greedy_text"].get<std::string>() + "\n");
}

TEST(CliDemo, ChatWrapsThePromptInTheTemplate) {
  CliRun r = tern("generate " + kDemo + " \"Hello\" --chat --temperature 0 --json --max-tokens 4");
  ASSERT_EQ(r.code, 0) << r.err;
  // The same prompt through `tern template` and `tern tokenize` gives the same token count.
  const std::string req = ::testing::TempDir() + "/tern_chat_request_" + std::to_string(getpid()) + ".json";
  std::ofstream(req) << R"({"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": true})";
  CliRun t = tern("template " + kDemo + " --request " + req);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.out, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  const std::string lines = ::testing::TempDir() + "/tern_chat_prompt_" + std::to_string(getpid()) + ".jsonl";
  std::ofstream(lines) << nlohmann::json({{"text", t.out}}).dump() << "\n";
  CliRun k = tern("tokenize " + kDemo + " --jsonl " + lines);
  ASSERT_EQ(k.code, 0) << k.err;
  auto ids = nlohmann::json::parse(k.out)["ids"].get<std::vector<int>>();
  EXPECT_EQ(nlohmann::json::parse(r.out)["prompt_tokens"].get<size_t>(), ids.size());
  EXPECT_EQ(ids.front(), 1);  // <|im_start|> is one special token
}

TEST(CliDemo, SeededSamplingIsDeterministic) {
  const std::string args = "generate " + kDemo + " \"The jury said\" --temperature 0.9 --top-p 0.95 --json --max-tokens 24";
  CliRun a = tern(args + " --seed 7"), b = tern(args + " --seed 7"), c = tern(args + " --seed 8");
  ASSERT_EQ(a.code, 0) << a.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out), jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(ja["ids"], jb["ids"]);
  EXPECT_NE(ja["ids"], jc["ids"]);
}

TEST(CliScore, LogitsOutWritesAllLogits) {
  const std::string path = ::testing::TempDir() + "/tern_logits_" + std::to_string(getpid()) + ".safetensors";
  CliRun r = tern("score " + kQwen3 + " --ids 1,2,3,4,5 --logits-out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  auto f = tern::io::SafetensorsFile::open(path);
  tern::Tensor t = f->get("logits");
  EXPECT_EQ(t.dtype(), tern::Dtype::f32);
  EXPECT_EQ(t.shape(), (tern::Shape{5, 512}));
}

TEST(CliInfo, DescribesTheDemoModel) {
  CliRun r = tern("info " + kDemo + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["layers"], 8);
  EXPECT_NEAR(j["parameters"].get<double>(), 14.2e6, 0.3e6);
}

TEST(CliBench, ReportsThroughput) {
  CliRun r = tern("bench " + kQwen3 + " --prompt-tokens 16 --gen-tokens 4 --repeats 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["prefill_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["decode_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["load_seconds"].get<double>(), 0);
  // The CPU decodes eagerly: no one-time steps, so the steady rate is the whole phase's.
  EXPECT_EQ(j["compiled_decode"], false);
  EXPECT_EQ(j["decode_setup_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["decode_steady_tokens_per_second"].get<double>(), j["decode_tokens_per_second"].get<double>());
}

// A model with routed experts: bench records one more decode step's routings and reports the distinct
// experts its batch chose a layer and their bytes (those the checkpoint stores: the CPU keeps them as
// stored). One token chooses exactly top-k; a batch of 4, between top-k and min(experts, 4 top-k).
TEST(CliBench, ReportsTheExpertsADecodeStepReads) {
  const std::string moe = std::string(TERN_TEST_DATA) + "/models/qwen3_moe";  // 3 layers, 2 with 8 experts, top-2
  auto f = tern::io::SafetensorsFile::open(moe + "/model.safetensors");
  uint64_t stored = 0;
  for (const auto& e : f->tensors())
    if (e.name.find(".mlp.experts.") != std::string::npos) stored += e.nbytes();
  const double per_expert = static_cast<double>(stored) / (2 * 8);
  for (int batch : {1, 4}) {
    CliRun r = tern("bench " + moe + " --prompt-tokens 8 --gen-tokens 2 --repeats 1 --warmup 0 --json --batch " +
                    std::to_string(batch));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["moe_decode_step"];
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["layers"], 2);
    EXPECT_EQ(j["experts"], 16);
    EXPECT_EQ(j["expert_bytes"].get<double>(), static_cast<double>(stored));
    const int64_t fewest = j["fewest_in_a_layer"], most = j["most_in_a_layer"], chosen = j["experts_chosen"];
    EXPECT_EQ(j["expert_bytes_read"].get<double>(), static_cast<double>(chosen) * per_expert);
    if (batch == 1) {
      EXPECT_EQ(fewest, 2);
      EXPECT_EQ(most, 2);
    } else {
      EXPECT_GE(fewest, 2);
      EXPECT_LE(most, 8);
      EXPECT_LE(fewest, most);
    }
    EXPECT_GE(chosen, 2 * fewest);
    EXPECT_LE(chosen, 2 * most);
  }
  CliRun dense = tern("bench " + kQwen3 + " --prompt-tokens 8 --gen-tokens 2 --repeats 1 --warmup 0 --json");
  ASSERT_EQ(dense.code, 0) << dense.err;
  EXPECT_FALSE(nlohmann::json::parse(dense.out).contains("moe_decode_step"));
}

// info counts the parameters one token uses: all but the routed experts it does not take (the checkpoint's
// expert tensors, (experts - top-k) / experts of them). A dense model uses all of them.
TEST(CliInfo, CountsTheParametersATokenUses) {
  struct Case {
    const char* model;
    int64_t experts, top_k;
  };
  for (const Case& c : {Case{"qwen3_moe", 8, 2}, Case{"qwen3_5_moe", 8, 2}, Case{"gemma4_moe", 4, 2}}) {
    const std::string dir = std::string(TERN_TEST_DATA) + "/models/" + c.model;
    auto f = tern::io::SafetensorsFile::open(dir + "/model.safetensors");
    int64_t expert_params = 0;
    for (const auto& e : f->tensors())
      if (e.name.find(".experts.") != std::string::npos) expert_params += tern::numel(e.shape);
    CliRun r = tern("info " + dir + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["active_parameters"].get<int64_t>(),
              j["parameters"].get<int64_t>() - expert_params / c.experts * (c.experts - c.top_k))
        << c.model;
    EXPECT_GT(expert_params, 0) << c.model;
  }
  CliRun dense = tern("info " + kQwen3 + " --json");
  ASSERT_EQ(dense.code, 0) << dense.err;
  const auto j = nlohmann::json::parse(dense.out);
  EXPECT_EQ(j["active_parameters"], j["parameters"]);
}

// An architecture tern does not run still gets its parameters and a KV estimate, every layer taken as
// full attention, and says that the layout is assumed.
TEST(CliInfo, AssumesFullLayersForAnUnknownArchitecture) {
  const std::string dir = ::testing::TempDir() + "/tern_info_unknown_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kQwen3 + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  auto config = nlohmann::json::parse(std::ifstream(kQwen3 + "/config.json"));
  config["model_type"] = "no_such_architecture";
  std::ofstream(dir + "/config.json") << config.dump();
  CliRun r = tern("info " + dir + " --json");
  CliRun known = tern("info " + kQwen3 + " --json");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(known.code, 0) << known.err;
  const auto j = nlohmann::json::parse(r.out), k = nlohmann::json::parse(known.out);
  EXPECT_EQ(j["kv_layout_known"], false);
  EXPECT_EQ(k["kv_layout_known"], true);
  EXPECT_EQ(j["kv_bytes_per_token"], k["kv_bytes_per_token"]);  // qwen3's layers are all full attention
  EXPECT_EQ(j["active_parameters"], j["parameters"]);
}

// --temperature decodes by sampling each row on the host, as generate does, and says so.
TEST(CliBench, SampledDecodeReportsItsSettings) {
  CliRun r = tern("bench " + kDemo + " --prompt-tokens 8 --gen-tokens 8 --repeats 1 --warmup 0 --batch 2 --json "
                  "--temperature 0.8 --top-p 0.9 --top-k 40 --seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["decode_tokens_per_second"].get<double>(), 0);
  EXPECT_NEAR(j["decode_sampling"]["top_p"].get<double>(), 0.9, 1e-6);
  EXPECT_EQ(j["decode_sampling"]["top_k"], 40);
  CliRun g = tern("bench " + kDemo + " --prompt-tokens 8 --gen-tokens 2 --repeats 1 --warmup 0 --json");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["decode_sampling"], "greedy");
}

// Each bad input: non-zero exit, nothing on stdout, one line on stderr naming the problem.
void expect_one_line_error(const std::string& args, const std::string& needle) {
  CliRun r = tern(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_TRUE(r.out.empty()) << args << " printed " << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
}

TEST(CliErrors, BadInputGetsOneLine) {
  expect_one_line_error("generate /nonexistent/model \"hi\"", "no such directory");
  expect_one_line_error("generate " + kDemo + " --ids 1,2,99999", "expected token ids in [0, 4096)");
  expect_one_line_error("generate " + kDemo + " --ids 1,x", "expected a non-negative integer token id");
  expect_one_line_error("generate " + kDemo + " \"hi\" --bogus", "unknown option --bogus");
  expect_one_line_error("generate " + kDemo + " \"hi\" --max-tokens", "expects a value");
  expect_one_line_error("generate " + kDemo + " \"hi\" --temperature -1", "temperature");
  expect_one_line_error("bench " + kDemo + " --temperature 0.7 --top-p 1.5", "top_p");
  expect_one_line_error("generate " + kDemo, "exactly one of PROMPT or --ids");
  expect_one_line_error("generate " + kQwen3 + " \"hi\"", "no tokenizer.json");
  expect_one_line_error("score " + kDemo + " --ids 5", "at least 2 tokens");
  expect_one_line_error("score " + kDemo + " --text-file /nonexistent.txt", "/nonexistent.txt: expected a readable file");
  // A directory where a file belongs is named as one (it was "internal error: basic_filebuf::underflow" for
  // --prompt-cache, an empty run for --jsonl and a JSON parse error for --request).
  const std::string tmp = ::testing::TempDir();
  expect_one_line_error("score " + kDemo + " --text-file " + tmp, "got a directory");
  expect_one_line_error("generate " + kDemo + " --ids 1,2 --max-tokens 1 --prompt-cache " + tmp, "got a directory");
  expect_one_line_error("template " + kDemo + " --request " + tmp, "got a directory");
  expect_one_line_error("tokenize " + kDemo + " --jsonl " + tmp, "got the directory");
  expect_one_line_error("generate " + kDemo + " --ids 1,2 --prefill-chunk -1", "expected --prefill-chunk >= 0, got -1");
  expect_one_line_error("bench " + kDemo + " --prefill-chunk -8", "expected --prefill-chunk >= 0, got -8");
  expect_one_line_error("nonsense", "unknown command");
  expect_one_line_error("generate " + kDemo + " \"hi\" --device quantum", "expected --device cpu, cuda or auto");
  // Numbers the engine keeps in narrower types are checked, not wrapped or turned into infinities.
  expect_one_line_error("generate " + kDemo + " \"hi\" --top-k 99999999999", "expected --top-k in [0, 2147483647]");
  expect_one_line_error("bench " + kDemo + " --temperature 1 --top-k -2", "expected --top-k in [0, 2147483647]");
  expect_one_line_error("generate " + kDemo + " \"hi\" --temperature 1e39", "within float range for --temperature");
  expect_one_line_error("generate " + kDemo + " \"hi\" --seed -5", "expected --seed in [0, ");
  expect_one_line_error("info " + kDemo + " --context -5", "expected --context in [1, ");
  // Request and JSONL files: a number past double range, and nesting deep enough to overflow a recursion.
  const std::string dir = ::testing::TempDir() + "/tern_cli_json_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  std::ofstream(dir + "/overflow.json") << R"({"messages": [{"role": "user", "content": "hi"}], "x": 1e400})";
  expect_one_line_error("template " + kDemo + " --request " + dir + "/overflow.json", "overflow");
  std::ofstream(dir + "/deep.json") << R"({"messages": [], "x": )" << deep << "}";
  expect_one_line_error("template " + kDemo + " --request " + dir + "/deep.json", "nested at most 256 deep");
  std::ofstream(dir + "/lines.jsonl") << deep << "\n";
  expect_one_line_error("tokenize " + kDemo + " --jsonl " + dir + "/lines.jsonl", "line 1: expected an object");
  std::ofstream(dir + "/overflow.jsonl") << "{\"text\": \"a\", \"n\": -1e999}\n";
  expect_one_line_error("tokenize " + kDemo + " --jsonl " + dir + "/overflow.jsonl", "line 1: expected a JSON object");
  std::filesystem::remove_all(dir);
}

TEST(CliHelp, EveryCommandDocumentsItsFlags) {
  CliRun r = tern("help");
  EXPECT_EQ(r.code, 0);
  for (const char* cmd : {"generate", "score", "info", "bench"}) {
    EXPECT_NE(r.out.find(cmd), std::string::npos);
    CliRun h = tern(std::string(cmd) + " --help");
    EXPECT_EQ(h.code, 0);
    EXPECT_NE(h.out.find("usage: tern " + std::string(cmd)), std::string::npos);
  }
  CliRun g = tern("generate --help");
  for (const char* flag : {"--ids", "--max-tokens", "--temperature", "--top-p", "--top-k", "--min-p", "--seed",
                           "--repetition-penalty", "--json", "--device"})
    EXPECT_NE(g.out.find(flag), std::string::npos) << flag;
}

}  // namespace
