// Prompt-cache identity: FNV-1a over config.json and every safetensors header, in file-name order.
#include "tern/engine/prompt_cache.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tern/base/error.h"
#include "tern/base/file.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) { return read_file(p.string(), "prompt-cache"); }

// The safetensors header: its 8-byte length, then that many bytes of JSON.
std::string safetensors_header(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  uint8_t len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  TERN_CHECK(in.gcount() == 8, "[prompt-cache] cannot read the safetensors header of {}", p.string());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  TERN_CHECK(n <= (uint64_t{1} << 30), "[prompt-cache] expected a safetensors header under 1 GiB in {}, got {} bytes",
             p.string(), n);
  std::string h(n, '\0');
  in.read(h.data(), static_cast<std::streamsize>(n));
  TERN_CHECK(static_cast<uint64_t>(in.gcount()) == n, "[prompt-cache] {} ends inside its safetensors header",
             p.string());
  return h;
}

void mix(uint64_t& h, const std::string& s) {
  const uint64_t n = s.size();
  h = fnv1a64(&n, sizeof n, h);
  h = fnv1a64(s.data(), s.size(), h);
}

}  // namespace

CacheFileIdentity prompt_cache_identity(const std::string& dir) {
  const fs::path d(dir);
  uint64_t h = kFnvOffset;
  mix(h, read_all(d / "config.json"));
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(d))
    if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    mix(h, n);
    mix(h, safetensors_header(d / n));
  }
  CacheFileIdentity id;
  id.model = fmt::format("{:016x}", h);
  if (fs::exists(d / "tokenizer.json")) {
    const std::string t = read_all(d / "tokenizer.json");
    id.tokenizer = fmt::format("{:016x}", fnv1a64(t.data(), t.size()));
  }
  return id;
}

}  // namespace tern
