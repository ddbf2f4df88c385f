#include "core/log.h"

#include <atomic>
#include <chrono>
#include <ctime>
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
  // Each line says when (UTC, to the millisecond) so that a log can be read against a client's or a
  // load balancer's: "2026-11-28T01:31:45.123Z [pagoda INFO] ...".
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s.%03ldZ [pagoda %s] %s\n", stamp, ms, names[static_cast<int>(level)], message.c_str());
}

}  // namespace pagoda
