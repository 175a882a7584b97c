// `tern template DIR --request FILE`: prints the rendered prompt exactly (no added newline) and exits 1
// with the template's own message on raise_exception. Skips when the CLI binary has not been built.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code;
  std::string out;
};

Result run(const std::string& cmd) {
  Result r{-1, {}};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class ChatTemplateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(TERN_BIN)) GTEST_SKIP() << "the tern CLI is not built (" << TERN_BIN << ")";
    dir_ = fs::temp_directory_path() / ("tern_template_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(ChatTemplateCli, DemoModelPromptIsExact) {
  std::string req = write("req.json", R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})");
  Result r = run(std::string(TERN_BIN) + " template " + TERN_SOURCE_DIR + "/models/brown-qwen3-14m --request " + req);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(ChatTemplateCli, RaiseExceptionExitsOneWithMessage) {
  write("tokenizer_config.json",
        R"({"chat_template": "{% if messages[0].role != 'user' %}{{ raise_exception('First message must be from the user') }}{% endif %}ok"})");
  std::string req = write("req.json", R"({"messages": [{"role": "assistant", "content": "x"}]})");
  Result r = run(std::string(TERN_BIN) + " template " + dir_.string() + " --request " + req + " 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("First message must be from the user"), std::string::npos) << r.out;
  std::string ok = write("ok.json", R"({"messages": [{"role": "user", "content": "x"}]})");
  r = run(std::string(TERN_BIN) + " template " + dir_.string() + " --request " + ok);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "ok");
}

}  // namespace
