#pragma once
// Environment variables set for one test and restored (or unset again) when it ends.
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace idist::test {

/// Sets variables with set() or removes them with unset(); the destructor restores every one, in reverse order.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  /// Sets `name` to `value` for the lifetime of this object.
  ScopedEnv& set(const char* name, const std::string& value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name, value.c_str(), 1);
    return *this;
  }

  /// Removes `name` from the environment for the lifetime of this object.
  ScopedEnv& unset(const char* name) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::unsetenv(name);
    return *this;
  }

  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace idist::test
