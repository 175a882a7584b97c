// FuzzSmoke: the safetensors header parser over the fuzz seed corpus and deterministic mutations of
// it; the only exception it may ever throw is tern::Error (libFuzzer runs the real campaign).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "tern/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace tern::io {
namespace {

// Parses bytes; returns true when accepted, false on tern::Error, and fails the test on anything else.
bool parse_ok(const std::string& bytes) {
  try {
    parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz.safetensors");
    return true;
  } catch (const tern::Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-tern exception: " << e.what();
    return false;
  }
}

void set_length(std::string& b, uint64_t n) {
  if (b.size() < 8) return;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
}

TEST(FuzzSmoke, SafetensorsHeader) {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TERN_SOURCE_DIR) +
                                                           "/tests/fuzz/corpus/io_safetensors")) {
    seeds.push_back(testing_util::read_file(e.path().string()));
  }
  std::sort(seeds.begin(), seeds.end());
  ASSERT_GE(seeds.size(), 5u);
  int accepted = 0;
  for (const auto& s : seeds) accepted += parse_ok(s);
  EXPECT_GE(accepted, 3);

  const char* tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "0", "-1", "1e400", "18446744073709551615",
                          "\"F64\"", "\"BF16\"", "null", "\"__metadata__\"", "\\u0000", "\xff", " "};
  std::mt19937_64 rng(20240611);
  auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  int mutated_accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = seeds[pick(seeds.size())];
    int n_mut = 1 + static_cast<int>(pick(4));
    for (int m = 0; m < n_mut; ++m) {
      switch (pick(7)) {
        case 0:  // flip a bit
          if (!b.empty()) b[pick(b.size())] ^= static_cast<char>(1 << pick(8));
          break;
        case 1:  // overwrite a byte
          if (!b.empty()) b[pick(b.size())] = static_cast<char>(rng());
          break;
        case 2:  // truncate
          b.resize(pick(b.size() + 1));
          break;
        case 3:  // change the header length: nearby, random, or huge
          set_length(b, pick(3) == 0 ? rng() : pick(3) == 0 ? b.size() - 8 + pick(16) : pick(b.size() + 8));
          break;
        case 4: {  // insert a JSON token
          const char* t = tokens[pick(std::size(tokens))];
          b.insert(std::min(b.size(), 8 + pick(b.size())), t);
          break;
        }
        case 5:  // erase a span
          if (b.size() > 9) {
            size_t at = 8 + pick(b.size() - 8);
            b.erase(at, pick(8));
          }
          break;
        default:  // append bytes
          b.append(pick(16), static_cast<char>(rng()));
          break;
      }
    }
    mutated_accepted += parse_ok(b);
  }
  EXPECT_GT(mutated_accepted, 0);
}

}  // namespace
}  // namespace tern::io
