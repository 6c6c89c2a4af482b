// Where log lines go (stderr or the program's sink) and which ones are written (level, rank).
#include "idist/logging.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "idist/context.hpp"
#include "idist/error.hpp"

namespace idist {

namespace {

struct SinkState {
  // Held while a line is written, so that lines never interleave and set_log_sink() can wait for a
  // sink call in progress.
  std::mutex mutex;
  LogSink sink;  // empty: stderr
};

SinkState& sink_state() {
  // Never destroyed: lines logged while static objects are destroyed at exit still find it.
  static auto* s = new SinkState;
  return *s;
}

// Set while this thread runs the program's sink: a line it logs goes to stderr (no deadlock).
thread_local bool t_in_sink = false;

void write_stderr(LogLevel level, std::string_view logger, std::string_view message) {
  fmt::print(stderr, "{}\n", format_log_line(level, logger, message));
  std::fflush(stderr);  // lines of several ranks sharing a terminal do not interleave mid-line
}

void emit(LogLevel level, std::string_view logger, std::string_view message) {
  const std::string name = fmt::format("idist.{}", logger);
  if (t_in_sink) return write_stderr(level, name, message);
  SinkState& s = sink_state();
  const std::lock_guard lock(s.mutex);
  if (!s.sink) return write_stderr(level, name, message);
  t_in_sink = true;
  try {
    s.sink(level, name, message);
  } catch (...) {  // a log call must not throw on the program's behalf
  }
  t_in_sink = false;
}

// The level to filter with: a bad IDIST_LOG_LEVEL is reported once per process, then Info applies.
LogLevel effective_level() {
  try {
    return log_level();
  } catch (const ValueError& e) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) emit(LogLevel::Warning, "logging", fmt::format("{}; logging at INFO", e.what()));
    return LogLevel::Info;
  }
}

bool enabled(LogLevel level) { return int(level) >= int(effective_level()); }

}  // namespace

std::string format_log_line(LogLevel level, std::string_view logger, std::string_view message) {
  return fmt::format("{} {}: {}", logger, to_string(level), message);
}

void set_log_sink(LogSink sink) {
  if (t_in_sink) throw ValueError("set_log_sink: called from inside a log sink; set the sink outside of it");
  SinkState& s = sink_state();
  {
    const std::lock_guard lock(s.mutex);
    s.sink.swap(sink);
  }
  // `sink` now holds the previous sink, destroyed here, outside the lock.
}

void set_log_stream(std::ostream& stream) {
  set_log_sink([&stream](LogLevel level, std::string_view logger, std::string_view message) {
    stream << format_log_line(level, logger, message) << std::endl;
  });
}

void log_debug(std::string_view logger, std::string_view message) {
  if (enabled(LogLevel::Debug) && get_rank() == 0) emit(LogLevel::Debug, logger, message);
}

void log_info(std::string_view logger, std::string_view message) {
  if (enabled(LogLevel::Info) && get_rank() == 0) emit(LogLevel::Info, logger, message);
}

void log_warning(std::string_view logger, std::string_view message) {
  if (enabled(LogLevel::Warning)) emit(LogLevel::Warning, logger, message);
}

}  // namespace idist
