// Chat templates end to end: every line of the qwen3/gemma3 chat.jsonl fixtures rendered with the
// real templates from the pinned npm tokenizer packages, the demo model's template, and loading rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tern/base/error.h"
#include "tern/text/chat_template.h"

namespace tern::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string test_data(const std::string& rel) { return std::string(TERN_TEST_DATA) + "/" + rel; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Renders each fixture line; returns {lines, passed}. Errors are expected as Python's
// "TemplateError('message')" repr, so the template's message must appear inside it.
std::pair<int, int> run_fixture(const std::string& name) {
  const std::string dir = test_data("tokenizers/npm/" + name);
  ChatTemplate tmpl = load_chat_template(dir);
  std::ifstream in(test_data("tokenizers/" + name + "/chat.jsonl"));
  EXPECT_TRUE(in.is_open()) << "missing chat.jsonl for " << name;
  std::string line;
  int n = 0, passed = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++n;
    ordered_json fx = ordered_json::parse(line);
    ordered_json vars = chat_template_vars(fx["input"]);
    if (fx.contains("rendered")) {
      std::string got;
      try {
        got = tmpl.render(vars);
      } catch (const Error& e) {
        ADD_FAILURE() << name << " line " << n << ": unexpected error " << e.what();
        continue;
      }
      EXPECT_EQ(got, fx["rendered"].get<std::string>()) << name << " line " << n;
      passed += got == fx["rendered"].get<std::string>();
    } else {
      const std::string expected = fx["error"].get<std::string>();
      try {
        std::string got = tmpl.render(vars);
        ADD_FAILURE() << name << " line " << n << ": expected error " << expected << ", rendered " << got;
      } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_FALSE(msg.empty());
        EXPECT_NE(expected.find("'" + msg + "'"), std::string::npos) << name << " line " << n << ": " << msg;
        passed += !msg.empty() && expected.find("'" + msg + "'") != std::string::npos;
      }
    }
  }
  return {n, passed};
}

bool have_npm(const std::string& name) { return fs::exists(test_data("tokenizers/npm/" + name + "/tokenizer_config.json")); }

TEST(ChatTemplateFixture, Qwen3EveryLine) {
  if (!have_npm("qwen3")) GTEST_SKIP() << "tests/data/tokenizers/npm/qwen3 is absent: run scripts/fetch_tokenizers.sh";
  auto [n, passed] = run_fixture("qwen3");
  EXPECT_EQ(n, 6);
  EXPECT_EQ(passed, n);
  RecordProperty("qwen3_passed", passed);
}

TEST(ChatTemplateFixture, Gemma3EveryLine) {
  if (!have_npm("gemma3")) GTEST_SKIP() << "tests/data/tokenizers/npm/gemma3 is absent: run scripts/fetch_tokenizers.sh";
  auto [n, passed] = run_fixture("gemma3");
  EXPECT_EQ(n, 6);
  EXPECT_EQ(passed, n);
  RecordProperty("gemma3_passed", passed);
}

TEST(ChatTemplateFixture, Gemma3FillsBosFromConfig) {
  if (!have_npm("gemma3")) GTEST_SKIP() << "tests/data/tokenizers/npm/gemma3 is absent: run scripts/fetch_tokenizers.sh";
  ChatTemplate t = load_chat_template(test_data("tokenizers/npm/gemma3"));
  ordered_json req = {{"messages", {{{"role", "user"}, {"content", "  hi  "}}}}, {"add_generation_prompt", true}};
  EXPECT_EQ(t.render(chat_template_vars(req)), "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
  // A request variable overrides the config's token.
  req["bos_token"] = "[B]";
  EXPECT_EQ(t.render(chat_template_vars(req)).substr(0, 3), "[B]");
}

TEST(ChatTemplateDemoModel, ChatMl) {
  // Expected output from Python Jinja2 3.1.6 with HF's environment settings.
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m";
  ordered_json req = ordered_json::parse(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello."},
      {"role": "user", "content": "Bye"}], "add_generation_prompt": true})");
  const std::string turns =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
      "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n";
  EXPECT_EQ(apply_chat_template(dir, req), turns + "<|im_start|>assistant\n");
  req["add_generation_prompt"] = false;
  EXPECT_EQ(apply_chat_template(dir, req), turns);
}

class ChatTemplateLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern_chat_template_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  std::string dir() const { return dir_.string(); }
  fs::path dir_;
};

TEST_F(ChatTemplateLoad, NamedTemplateList) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default", "template": "D{{ bos_token }}"},
      {"name": "tool_use", "template": "T{{ eos_token }}"}],
      "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  EXPECT_EQ(load_chat_template(dir()).render(ordered_json::object()), "D<s>");
  EXPECT_EQ(load_chat_template(dir(), "tool_use").render(ordered_json::object()), "T</s>");
  try {
    load_chat_template(dir(), "rag");
    FAIL() << "expected an error for a missing template name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("default, tool_use"), std::string::npos) << e.what();
  }
}

TEST_F(ChatTemplateLoad, JinjaFileWinsOverConfig) {
  write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "E"})");
  write("chat_template.jinja", "file {{ eos_token }}\n");
  EXPECT_EQ(load_chat_template(dir()).render(ordered_json::object()), "file E");
}

TEST_F(ChatTemplateLoad, NullBosStaysUndefined) {
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token is defined }}", "bos_token": null})");
  EXPECT_EQ(load_chat_template(dir()).render(ordered_json::object()), "False");
}

TEST_F(ChatTemplateLoad, NoTemplateThrows) {
  write("tokenizer_config.json", R"({"eos_token": "E"})");
  EXPECT_THROW(load_chat_template(dir()), Error);
  write("tokenizer_config.json", "{not json");
  EXPECT_THROW(load_chat_template(dir()), Error);
}

TEST_F(ChatTemplateLoad, HfDefaultVariables) {
  write("tokenizer_config.json",
        R"({"chat_template": "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ enable_thinking }}"})");
  ordered_json req = {{"messages", ordered_json::array()}, {"enable_thinking", false}};
  EXPECT_EQ(apply_chat_template(dir(), req), "True True False False");
}

TEST(ChatTemplateApi, RaiseExceptionMessageIsBare) {
  ChatTemplate t = ChatTemplate::parse("a{{ raise_exception('Only user and assistant roles are supported!') }}");
  try {
    t.render(ordered_json::object());
    FAIL() << "expected raise_exception to throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Only user and assistant roles are supported!");
  }
}

TEST(ChatTemplateApi, SyntaxErrorHasLineAndColumn) {
  try {
    ChatTemplate::parse("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[template] line 3 col 8: expected an expression, got '}}'");
  }
  EXPECT_THROW(ChatTemplate::parse("{% for x in y %}no end"), Error);
  EXPECT_THROW(ChatTemplate::parse("{% include 'other.j2' %}"), Error);
  EXPECT_THROW(ChatTemplate::parse("{{ 'unterminated }}"), Error);
  EXPECT_THROW(ChatTemplate::parse("{# unterminated"), Error);
}

TEST(ChatTemplateApi, RuntimeErrorHasLine) {
  ChatTemplate t = ChatTemplate::parse("ok\n{{ messages.x.y }}");
  try {
    t.render(ordered_json::object());
    FAIL() << "expected an undefined error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[template] line 2: 'messages' is undefined");
  }
  EXPECT_THROW(t.render(ordered_json::array()), Error);
}

TEST(ChatTemplateApi, KeyOrderIsKeptForTojson) {
  ChatTemplate t = ChatTemplate::parse("{{ tools[0] | tojson }}");
  ordered_json vars = ordered_json::parse(R"({"tools": [{"type": "function", "function": {"name": "f", "a": 1}}]})");
  EXPECT_EQ(t.render(vars), R"({"type": "function", "function": {"name": "f", "a": 1}})");
  // A plain (sorted) nlohmann::json converts implicitly.
  nlohmann::json plain = nlohmann::json::parse(R"({"tools": [{"z": 1, "a": 2}]})");
  EXPECT_EQ(t.render(plain), R"({"a": 2, "z": 1})");
}

TEST(ChatTemplateApi, LimitsStopRunawayTemplates) {
  TemplateLimits small;
  small.max_steps = 100000;
  small.max_output_bytes = 1 << 16;
  auto expect_limit = [&](const std::string& src) {
    ChatTemplate t = ChatTemplate::parse(src, small);
    EXPECT_THROW(t.render(ordered_json::object()), Error) << src;
  };
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  expect_limit("{{ 'x' * 100000000 }}");
  expect_limit("{{ ['x' * 60000] * 20 }}");
  expect_limit("{{ (['x' * 60000] * 20) | tojson }}");
  expect_limit("{{ ('x' * 60000) | list }}");
  expect_limit("{{ ('x' * 60000).split('x') }}");
  expect_limit("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  expect_limit("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}");
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(300, '[') + std::string(300, ']') + " }}"), Error);
  EXPECT_THROW(ChatTemplate::parse(std::string(20000, '{')), Error);
  std::string nested_ifs;
  for (int i = 0; i < 300; ++i) nested_ifs += "{% if x %}";
  EXPECT_THROW(ChatTemplate::parse(nested_ifs), Error);
}

TEST(ChatTemplateApi, CopiesShareTheParsedProgram) {
  ChatTemplate a = ChatTemplate::parse("{{ x }}");
  ChatTemplate b = a;
  b.set_default("x", "B");
  EXPECT_EQ(a.render(ordered_json::object()), "");
  EXPECT_EQ(b.render(ordered_json::object()), "B");
  EXPECT_EQ(b.source(), "{{ x }}");
}

}  // namespace
}  // namespace tern::text
