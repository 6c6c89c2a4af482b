// The log level: its names, set_log_level() and IDIST_LOG_LEVEL.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <string>

#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "launch/settings.hpp"

namespace idist {

namespace {

constexpr std::string_view kAccepted = "DEBUG, INFO, WARNING, OFF";

// 0 until set_log_level(): then the level's value, which takes precedence over the environment.
std::atomic<int> g_set_level{0};

}  // namespace

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::Debug: return "DEBUG";
    case LogLevel::Info: return "INFO";
    case LogLevel::Warning: return "WARNING";
    case LogLevel::Off: return "OFF";
  }
  return "OFF";
}

LogLevel parse_log_level(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Warning, LogLevel::Off})
    if (upper == to_string(l)) return l;
  throw ValueError(fmt::format("log level should be one of {} (any case), but given '{}'", kAccepted, text));
}

void set_log_level(std::optional<LogLevel> level) noexcept {
  g_set_level.store(level ? int(*level) : 0, std::memory_order_relaxed);
}

LogLevel log_level() {
  if (const int set = g_set_level.load(std::memory_order_relaxed)) return LogLevel(set);
  // Read at each use (lines are rare), so a program may still set the variable before it logs.
  return launch::log_level().value_or(LogLevel::Info);
}

}  // namespace idist
