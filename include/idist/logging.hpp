#pragma once
/// @file
/// idist's log lines: where ignite logs through its `setup_logger` (INFO on rank 0 only) or warns
/// through Python's `warnings.warn` (every process), idist writes one line per message. By default
/// the lines go to stderr as `idist.<logger> INFO: <message>` or `idist.<logger> WARNING: <message>`,
/// the logger name being the part of ignite's module path after `ignite.` (e.g.
/// "distributed.launcher.Parallel").
///
/// A program chooses how much is written (a level: set_log_level(), or the environment variable
/// IDIST_LOG_LEVEL) and where it goes (a sink: set_log_sink(), set_log_stream()):
///
///     idist::set_log_level(idist::LogLevel::Warning);  // warnings only
///     idist::set_log_sink([](idist::LogLevel level, std::string_view logger, std::string_view message) {
///       my_logger.write(idist::to_string(level), logger, message);
///     });
///
/// Every function here may be called from any thread.

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace idist {

/// How much idist logs: a message is written when its level is at least the current one. The
/// values are those of Python's logging module (DEBUG 10, INFO 20, WARNING 30); Off is above every
/// message's level. ignite logs at INFO (rank 0) and warns (every rank); Debug adds idist's own
/// detail, Off silences idist.
enum class LogLevel : int {
  Debug = 10,    ///< everything, idist's own detail included (rank 0)
  Info = 20,     ///< ignite's INFO lines (rank 0) and the warnings: the default
  Warning = 30,  ///< the warnings only (every rank)
  Off = 100,     ///< nothing
};

/// "DEBUG", "INFO", "WARNING" or "OFF": the name a log line shows and IDIST_LOG_LEVEL takes.
std::string_view to_string(LogLevel level) noexcept;

/// The level named `text`: DEBUG, INFO, WARNING or OFF, in any case (Python's names).
/// @throws ValueError naming `text` and the accepted names otherwise.
LogLevel parse_log_level(std::string_view text);

/// Sets the level of the whole process (every logger); it takes precedence over IDIST_LOG_LEVEL.
/// std::nullopt returns to the variable (or the default, Info).
void set_log_level(std::optional<LogLevel> level) noexcept;

/// The current level: the last set_log_level(), else the environment variable IDIST_LOG_LEVEL
/// (read at each call: a program may set it before it logs), else LogLevel::Info.
/// @throws ValueError when IDIST_LOG_LEVEL holds something else than DEBUG, INFO, WARNING or OFF
///         (initialize() calls this, so a misspelt variable stops a distributed run at once). The
///         log functions do not throw: they warn once instead, naming the accepted values, and log
///         at Info.
LogLevel log_level();

/// Receives each line idist writes, after the level and rank filters: its level, the full logger
/// name ("idist.distributed.launcher.Parallel") and the message (no trailing newline). Called on
/// the thread that logs, one call at a time (calls of several threads are serialized), so a sink
/// needs no lock of its own. A sink must not throw; what it throws is dropped. A sink that itself
/// logs through idist has those lines written to stderr.
using LogSink = std::function<void(LogLevel level, std::string_view logger, std::string_view message)>;

/// Sends idist's log lines to `sink` instead of stderr; an empty sink restores stderr. Once it
/// returns, the previous sink is not running and is not called again, so whatever it refers to may
/// be destroyed. Mirrors adding a handler to ignite's loggers.
/// @throws ValueError when called from inside a sink (it would wait for itself).
void set_log_sink(LogSink sink);

/// Writes idist's log lines to `stream` in the default format (format_log_line), one line each,
/// flushed. The stream must outlive its use: until another set_log_sink() / set_log_stream().
/// @throws ValueError when called from inside a sink.
void set_log_stream(std::ostream& stream);

/// The line the default sink writes: `<logger> <LEVEL>: <message>` (no newline), e.g.
/// `idist.distributed INFO: backend: mpi`. For sinks that keep idist's format.
std::string format_log_line(LogLevel level, std::string_view logger, std::string_view message);

/// Logs `message` at Debug as `idist.LOGGER`, on rank 0 only. idist's own detail; ignite has no such
/// lines.
void log_debug(std::string_view logger, std::string_view message);

/// Logs `message` at Info as `idist.LOGGER`, on rank 0 only (other ranks stay silent, as ignite's
/// loggers do on ranks > 0). Mirrors `setup_logger(__name__).info(message)` in ignite.
void log_info(std::string_view logger, std::string_view message);

/// Logs `message` at Warning as `idist.LOGGER`, on every rank. Mirrors ignite's
/// `warnings.warn(message)`, which each process prints.
void log_warning(std::string_view logger, std::string_view message);

}  // namespace idist
