// Logging to stderr with a level set by TERN_LOG (debug|info|warn|error|off; default info) or set_log_level.
#pragma once
#include <fmt/format.h>
#include <string>

namespace tern {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& msg);

template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::debug) log_write(LogLevel::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::info) log_write(LogLevel::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::warn) log_write(LogLevel::warn, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tern
