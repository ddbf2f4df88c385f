// Minimal leveled logging to stderr. Level set once at start-up (PAGODA_LOG=debug|info|warn|error).
#pragma once

#include <sstream>
#include <string>

namespace pagoda {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& message);

}  // namespace pagoda

#define PAGODA_LOG(level, expr)                                         \
  do {                                                                  \
    if (static_cast<int>(level) >= static_cast<int>(::pagoda::log_level())) { \
      std::ostringstream pagoda_log_os_;                                \
      pagoda_log_os_ << expr;                                           \
      ::pagoda::log_write(level, pagoda_log_os_.str());                 \
    }                                                                   \
  } while (0)
#define LOG_DEBUG(expr) PAGODA_LOG(::pagoda::LogLevel::Debug, expr)
#define LOG_INFO(expr) PAGODA_LOG(::pagoda::LogLevel::Info, expr)
#define LOG_WARN(expr) PAGODA_LOG(::pagoda::LogLevel::Warn, expr)
#define LOG_ERROR(expr) PAGODA_LOG(::pagoda::LogLevel::Error, expr)
