// DebugLevel's names and the debug layer's settings (the variables are parsed in launch/settings.cpp).
#include "core/debug/debug_settings.hpp"

#include <fmt/format.h>

#include <string>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "launch/settings.hpp"

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
  if (requested)
    s.level = *requested;
  else if (const auto level = launch::distributed_debug())
    s.level = *level;
  s.trace_dir = launch::trace_dir().value_or("");
  s.trace_buffer = launch::trace_buffer().value_or(kDefaultTraceBuffer);
  return s;
}

}  // namespace core::debug

}  // namespace idist
