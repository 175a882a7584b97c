// Whole-file reads for configs, tokenizers and templates: one allocation, one read.
#pragma once
#include <string>
#include <string_view>

namespace tern {

// The bytes of the file at `path`. Throws `[area] expected a readable file PATH, got <reason>`.
std::string read_file(const std::string& path, std::string_view area);

}  // namespace tern
