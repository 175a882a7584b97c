// Whole-file reads for configs, tokenizers and templates (one allocation, one read), and atomic
// whole-file writes for checkpoints and prompt caches.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tern {

// The bytes of the file at `path`. Throws `[area] PATH: expected a readable file, got <reason>` (or a
// regular file, got a directory).
std::string read_file(const std::string& path, std::string_view area);

// Appends n bytes to the file being written (write_file_atomic's fill).
using WriteBytes = std::function<void(const void* data, size_t n)>;

// Writes the file at `path` all or nothing: `fill` writes its bytes into a temporary file beside it
// (PATH.tmp.PID), which is fsynced and renamed over `path`; then the directory is fsynced. On any error
// (or an exception from fill) the temporary file is removed, `path` is left as it was, and the message
// reads `[area] PATH: expected ..., got <reason>`.
void write_file_atomic(const std::string& path, std::string_view area, const std::function<void(const WriteBytes&)>& fill);

}  // namespace tern
