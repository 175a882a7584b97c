// How much memory the host can still give a process: Linux's MemAvailable, the estimate of what can be
// allocated without swapping (page cache that can be dropped included).
#pragma once
#include <cstdint>
#include <string_view>

namespace tern {

// The MemAvailable line of a /proc/meminfo text ("MemAvailable:   12345 kB"), in bytes. Throws
// `[memory] /proc/meminfo: expected a line "MemAvailable: N kB", got ...` when it is missing or malformed.
int64_t parse_mem_available(std::string_view meminfo);

// parse_mem_available of this host's /proc/meminfo.
int64_t host_available_memory();

}  // namespace tern
