#pragma once
// The diagnostic settings read once at initialize() (or when a context is adopted).
#include <cstddef>
#include <optional>
#include <string>

#include "idist/debug.hpp"

namespace idist::core::debug {

/// Default number of collectives the flight recorder keeps.
inline constexpr std::size_t kDefaultTraceBuffer = 2000;

struct Settings {
  DebugLevel level = DebugLevel::Off;
  std::string trace_dir;                           ///< IDIST_TRACE_DIR; empty: summaries on stderr
  std::size_t trace_buffer = kDefaultTraceBuffer;  ///< IDIST_TRACE_BUFFER
  /// Whether collectives go through the debug wrapper: any level but Off, or a trace directory.
  bool wrapped() const noexcept { return level != DebugLevel::Off || !trace_dir.empty(); }
};

/// `requested` (InitOptions::debug) or IDIST_DISTRIBUTED_DEBUG, plus IDIST_TRACE_DIR / IDIST_TRACE_BUFFER.
/// @throws ValueError for an invalid variable, naming it and the accepted values.
Settings read_settings(const std::optional<DebugLevel>& requested);

}  // namespace idist::core::debug
