#pragma once
// Reading integers and addresses out of environment variables, with ValueErrors that name the variable.
#include <optional>
#include <string>

#include "rendezvous/discovery.hpp"

namespace idist::rendezvous::detail {

/// The value of `name`, or nullopt when unset.
std::optional<std::string> lookup(const Environ& env, const std::string& name);
/// Parses `value` of variable `name` as an int. @throws ValueError "<name> should be an integer, got '<value>'".
int parse_int(const std::string& name, const std::string& value);
/// parse_int of a variable that may be unset.
std::optional<int> get_int(const Environ& env, const std::string& name);
/// Parses a TCP port (1..65535) given by `name`. @throws ValueError.
int parse_port(const std::string& name, const std::string& value);

}  // namespace idist::rendezvous::detail
