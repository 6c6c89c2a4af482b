// IDIST_DISTRIBUTED_DEBUG, IDIST_TRACE_BUFFER and IDIST_TRACE_DIR.
#include "core/debug/debug_settings.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "idist/context.hpp"
#include "idist/error.hpp"

namespace idist {

DebugLevel parse_debug_level(std::string_view text) {
  if (text == "OFF") return DebugLevel::Off;
  if (text == "INFO") return DebugLevel::Info;
  if (text == "DETAIL") return DebugLevel::Detail;
  throw ValueError(fmt::format("IDIST_DISTRIBUTED_DEBUG should be one of OFF, INFO, DETAIL, but given '{}'", text));
}

std::string_view to_string(DebugLevel level) noexcept {
  switch (level) {
    case DebugLevel::Off: return "OFF";
    case DebugLevel::Info: return "INFO";
    case DebugLevel::Detail: return "DETAIL";
  }
  return "OFF";
}

namespace core::debug {

Settings read_settings(const std::optional<DebugLevel>& requested) {
  Settings s;
  const char* level = std::getenv("IDIST_DISTRIBUTED_DEBUG");
  if (requested)
    s.level = *requested;
  else if (level && *level)
    s.level = parse_debug_level(level);
  const char* dir = std::getenv("IDIST_TRACE_DIR");
  if (dir && *dir) s.trace_dir = dir;
  if (const char* n = std::getenv("IDIST_TRACE_BUFFER"); n && *n) {
    char* end = nullptr;
    const long long v = std::strtoll(n, &end, 10);
    if (*end != '\0' || v < 1 || v > 10'000'000)
      throw ValueError(
          fmt::format("IDIST_TRACE_BUFFER should be a number of collectives in [1, 10000000], but "
                      "given '{}'",
                      n));
    s.trace_buffer = std::size_t(v);
  }
  return s;
}

}  // namespace core::debug

}  // namespace idist
