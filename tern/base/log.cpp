// stderr logger; the level comes from TERN_LOG once, then set_log_level.
#include "tern/base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tern {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("TERN_LOG");
  if (!v) return LogLevel::info;
  if (!std::strcmp(v, "debug")) return LogLevel::debug;
  if (!std::strcmp(v, "warn")) return LogLevel::warn;
  if (!std::strcmp(v, "error")) return LogLevel::error;
  if (!std::strcmp(v, "off")) return LogLevel::off;
  return LogLevel::info;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_ref().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }

void log_write(LogLevel level, const std::string& msg) {
  static std::mutex mu;
  static const char* names[] = {"debug", "info", "warn", "error", "off"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[tern %s] %s\n", names[static_cast<int>(level)], msg.c_str());
}

}  // namespace tern
