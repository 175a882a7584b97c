#include "tern/base/host_memory.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "tern/base/error.h"
#include "tern/base/file.h"

namespace tern {

int64_t parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  for (size_t at = 0; at < meminfo.size();) {
    const size_t end = std::min(meminfo.find('\n', at), meminfo.size());
    const std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(key)) continue;
    std::string_view rest = line.substr(key.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    int64_t kib = -1;
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    const bool ok = ec == std::errc{} && kib >= 0 && kib <= (int64_t{1} << 50) &&
                    std::string_view(p, rest.data() + rest.size() - p) == " kB";
    TERN_CHECK(ok, "[memory] /proc/meminfo: expected a line \"MemAvailable: N kB\", got '{}'", std::string(line));
    return kib * 1024;
  }
  TERN_THROW("[memory] /proc/meminfo: expected a line \"MemAvailable: N kB\", got none");
}

int64_t host_available_memory() { return parse_mem_available(read_file("/proc/meminfo", "memory")); }

}  // namespace tern
