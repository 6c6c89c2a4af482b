#pragma once
/// @file
/// EnvOverride: sets environment variables for the lifetime of a backend and restores the previous
/// values afterwards, as ignite's native model does (it exports RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR
/// and MASTER_PORT, e.g. derived from SLURM, and finalize() "restores the environment it changed").

#include <map>
#include <optional>
#include <string>

namespace idist::rendezvous {

struct WorldInfo;

/// Sets environment variables and remembers the values they replace; restore() (or the destructor)
/// puts every one back (re-setting the old value, or unsetting a variable that did not exist).
/// Not thread safe: setenv / unsetenv race with concurrent reads of the environment in other threads, as in
/// any program.
class EnvOverride {
 public:
  EnvOverride() = default;
  /// Exports RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT of `info`.
  explicit EnvOverride(const WorldInfo& info);
  ~EnvOverride() { restore(); }
  EnvOverride(EnvOverride&& other) noexcept;
  EnvOverride& operator=(EnvOverride&& other) noexcept;
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

  /// Sets `name` to `value`, remembering the value before the first change of `name`.
  void set(const std::string& name, const std::string& value);
  /// Unsets `name`, remembering the value before the first change of `name`.
  void unset(const std::string& name);
  /// Restores every changed variable; afterwards the object holds nothing. Idempotent.
  void restore() noexcept;
  /// True while some variable is changed.
  bool active() const { return !saved_.empty(); }

 private:
  void remember(const std::string& name);
  std::map<std::string, std::optional<std::string>> saved_;  // name -> previous value (nullopt: unset)
};

}  // namespace idist::rendezvous
