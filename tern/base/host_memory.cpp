#include "tern/base/host_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "tern/base/error.h"

namespace tern {

int64_t parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  size_t at = meminfo.find(key);
  while (at != std::string_view::npos && at != 0 && meminfo[at - 1] != '\n') at = meminfo.find(key, at + 1);
  TERN_CHECK(at != std::string_view::npos, "[memory] /proc/meminfo: expected a line \"MemAvailable: N kB\", got none");
  const size_t end = meminfo.find('\n', at);
  std::string_view line = meminfo.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
  std::string_view rest = line.substr(key.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  int64_t kib = -1;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  const bool ok = ec == std::errc{} && kib >= 0 && kib <= (int64_t{1} << 50) &&
                  std::string_view(p, rest.data() + rest.size() - p) == " kB";
  TERN_CHECK(ok, "[memory] /proc/meminfo: expected a line \"MemAvailable: N kB\", got '{}'", std::string(line));
  return kib * 1024;
}

// Read as a stream: procfs files report a size of 0, so read_file's one sized read would get nothing.
int64_t host_available_memory() {
  std::ifstream in("/proc/meminfo");
  TERN_CHECK(in.good(), "[memory] /proc/meminfo: expected a readable file, got none (not Linux?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace tern
