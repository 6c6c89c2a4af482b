#include "rendezvous/env_parse.hpp"

#include <charconv>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::rendezvous::detail {

std::optional<std::string> lookup(const Environ& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

int parse_int(const std::string& name, const std::string& value) {
  int out = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  if (!value.empty() && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (value.empty() || ec != std::errc() || ptr != last)
    throw ValueError(fmt::format("{} should be an integer, got '{}'", name, value));
  return out;
}

std::optional<int> get_int(const Environ& env, const std::string& name) {
  const auto v = lookup(env, name);
  if (!v) return std::nullopt;
  return parse_int(name, *v);
}

int parse_port(const std::string& name, const std::string& value) {
  const int port = parse_int(name, value);
  if (port < 1 || port > 65535)
    throw ValueError(fmt::format("{} should be a TCP port in [1, 65535], got {}", name, port));
  return port;
}

}  // namespace idist::rendezvous::detail
