#pragma once
/// @file
/// The one reader of the process environment in libidist. Every variable idist reads goes through
/// read() or snapshot() and is named in the table of launch/variables.hpp, which docs/launching.md
/// lists (tests/docs/launch_variables_test.cpp holds the two together).
///
/// Values are read at the call, not cached at load: programs and tests set variables before
/// initialize() and between two initializations, and each setting is read when the code that uses it
/// runs (see launch/settings.hpp for when that is).
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace idist::launch {

/// Environment variables, name -> value.
using Environ = std::map<std::string, std::string>;

/// The value of `name` when it is set (possibly empty), else nullopt.
/// @throws std::logic_error when `name` is not in variables(): a variable idist reads is documented.
std::optional<std::string> read(std::string_view name);

/// read(), with an empty value taken as unset (the rule of most of idist's settings).
std::optional<std::string> read_nonempty(std::string_view name);

/// A copy of the whole environment, for the code that looks at many launcher variables together (rank
/// discovery, the launcher line of show_config()). Its readers look only at names in variables().
Environ snapshot();

/// The value of any variable, listed or not, for saving it before it is overwritten and restoring it
/// afterwards (rendezvous::EnvOverride): a saved value is not a setting idist reads.
std::optional<std::string> saved_value(const std::string& name);

}  // namespace idist::launch
