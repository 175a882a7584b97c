// tern tokenize: token ids of text with a model directory's tokenizer.json, one JSON object per text.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tern/base/error.h"
#include "tern/base/file.h"
#include "tern/base/timer.h"
#include "tern/text/tokenizer.h"
#include "tools/cli/command.h"

namespace tern::cli {
namespace {

// {"ids": [...]} (+ "decoded") for one text.
std::string tokenize_line(const text::Tokenizer& tok, const std::string& text, bool add_special, bool decode) {
  std::vector<int32_t> ids = tok.encode(text, add_special);
  nlohmann::ordered_json out = {{"ids", ids}};
  if (decode) out["decoded"] = tok.decode(ids);
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// --bench: one timed load, then the whole file encoded as one text `repeats` times (best time kept).
// Prints the timings and an FNV-1a hash of the ids, so another tokenizer's ids can be checked equal.
int bench_tokenizer(const std::string& dir, const std::string& path, int64_t repeats, bool add_special) {
  Timer load;
  const text::Tokenizer tok = text::Tokenizer::load(dir);
  const double load_ms = load.seconds() * 1e3;
  const std::string text = read_file(path, "tokenize");
  double best = 1e300;
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < repeats; ++r) {
    Timer t;
    ids = tok.encode(text, add_special);
    best = std::min(best, t.seconds());
  }
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) {
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  nlohmann::ordered_json out = {{"load_ms", load_ms},          {"bytes", text.size()},
                                {"tokens", ids.size()},        {"encode_s", best},
                                {"mb_per_s", text.size() / best / 1e6}, {"ids_fnv1a", fmt::format("{:016x}", h)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int run_tokenize(int argc, char** argv) {
  Args a("tokenize", "Print the token ids of text, exactly as Hugging Face tokenizers would: {\"ids\": [...]}.");
  a.positional("MODEL_DIR", "a model directory with tokenizer.json (tokenizer_config.json optional)")
      .flag("text", "TEXT", "the text to tokenize")
      .flag("jsonl", "FILE", "read one JSON object with a \"text\" field per line (- for stdin); print one line each")
      .flag("add-special", "", "apply the tokenizer's post-processor (BOS and the like)")
      .flag("decode", "", "also print \"decoded\": the decode of the ids, special tokens kept")
      .flag("bench", "FILE", "time the tokenizer load and the encode of FILE as one text; print JSON timings")
      .flag("repeats", "N", "encodes timed by --bench, best kept", "3");
  if (!a.parse(argc, argv)) return 0;
  if (a.has("bench")) {
    int64_t repeats = a.get_int("repeats");
    TERN_CHECK(repeats >= 1, "[tokenize] expected --repeats >= 1, got {}", repeats);
    return bench_tokenizer(a.get("MODEL_DIR"), a.get("bench"), repeats, a.has("add-special"));
  }
  TERN_CHECK(a.has("text") != a.has("jsonl"), "[tokenize] expected exactly one of --text or --jsonl, got {}",
             a.has("text") ? "both" : "neither");
  const text::Tokenizer tok = text::Tokenizer::load(a.get("MODEL_DIR"));
  const bool add_special = a.has("add-special"), decode = a.has("decode");
  if (a.has("text")) {
    std::printf("%s\n", tokenize_line(tok, a.get("text"), add_special, decode).c_str());
    return 0;
  }
  const std::string path = a.get("jsonl");
  std::ifstream file;
  if (path != "-") {
    std::error_code ec;
    TERN_CHECK(!std::filesystem::is_directory(path, ec), "[tokenize] expected a readable --jsonl file, got the directory '{}'",
               path);
    file.open(path);
    TERN_CHECK(file.is_open(), "[tokenize] expected a readable --jsonl file, got '{}'", path);
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      TERN_THROW("[tokenize] {} line {}: expected a JSON object, got a parse error at byte {}", path, n, e.byte);
    } catch (const nlohmann::json::exception& e) {  // a number past double range
      TERN_THROW("[tokenize] {} line {}: expected a JSON object, got {}", path, n, e.what());
    }
    // The line as written, not re-serialised: printing a deeply nested value recurses once a level.
    TERN_CHECK(j.is_object() && j.contains("text") && j["text"].is_string(),
               "[tokenize] {} line {}: expected an object with a string \"text\", got {}", path, n,
               line.substr(0, 80));
    std::printf("%s\n", tokenize_line(tok, j["text"].get<std::string>(), add_special, decode).c_str());
  }
  return 0;
}

}  // namespace

TERN_COMMAND("tokenize", "print token ids of text (--text or --jsonl) with a model's tokenizer", run_tokenize);

}  // namespace tern::cli
