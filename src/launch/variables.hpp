#pragma once
/// @file
/// The table of every environment variable idist reads: its name, what it accepts, what applies when
/// it is unset, and who reads it. launch::read() refuses a name the table does not hold, and
/// docs/launching.md's table of variables must list the same names with the same defaults.
#include <span>
#include <string_view>

namespace idist::launch {

/// One environment variable idist reads.
struct Variable {
  std::string_view name;      ///< e.g. "IDIST_SPAWN_BIND"
  std::string_view values;    ///< what it accepts, as the error messages name it
  std::string_view fallback;  ///< what applies when it is unset (docs/launching.md's "default" column)
  std::string_view read_by;   ///< the part of idist that reads it
};

/// Every variable idist reads, idist's own (IDIST_*) first, then the launchers' and the libraries'.
std::span<const Variable> variables();

/// The entry of `name`, or nullptr when idist does not read it.
const Variable* find_variable(std::string_view name);

}  // namespace idist::launch
