#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pagoda {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("PAGODA_LOG");
  if (!env) return LogLevel::Info;
  if (!std::strcmp(env, "debug")) return LogLevel::Debug;
  if (!std::strcmp(env, "warn")) return LogLevel::Warn;
  if (!std::strcmp(env, "error")) return LogLevel::Error;
  return LogLevel::Info;
}

std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_slot().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_slot().store(static_cast<int>(level)); }

void log_write(LogLevel level, const std::string& message) {
  static const char* names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[pagoda %s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace pagoda
