// The environment's one reader: getenv and environ appear nowhere else in src/.
#include "launch/environment.hpp"

#include <cstdlib>
#include <stdexcept>

#include "launch/variables.hpp"

extern char** environ;

namespace idist::launch {

std::optional<std::string> read(std::string_view name) {
  if (!find_variable(name))
    throw std::logic_error("idist reads the environment variable " + std::string(name) +
                           ", which src/launch/variables.cpp does not list");
  return saved_value(std::string(name));
}

std::optional<std::string> read_nonempty(std::string_view name) {
  auto v = read(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

Environ snapshot() {
  Environ env;
  for (char** e = ::environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> saved_value(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace idist::launch
