// log_info / log_warning: one line each on stderr, flushed at once so that lines of several ranks
// sharing a terminal do not interleave mid-line.
#include "idist/logging.hpp"

#include <fmt/format.h>

#include "idist/context.hpp"

namespace idist {

namespace {

void write_line(std::string_view logger, std::string_view level, std::string_view message) {
  fmt::print(stderr, "idist.{} {}: {}\n", logger, level, message);
  std::fflush(stderr);
}

}  // namespace

void log_info(std::string_view logger, std::string_view message) {
  if (get_rank() == 0) write_line(logger, "INFO", message);
}

void log_warning(std::string_view logger, std::string_view message) { write_line(logger, "WARNING", message); }

}  // namespace idist
