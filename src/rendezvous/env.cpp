#include "rendezvous/env.hpp"

#include <cstdlib>

#include "launch/environment.hpp"
#include "rendezvous/discovery.hpp"

namespace idist::rendezvous {

EnvOverride::EnvOverride(const WorldInfo& info) {
  set("RANK", std::to_string(info.rank));
  set("LOCAL_RANK", std::to_string(info.local_rank));
  set("WORLD_SIZE", std::to_string(info.world_size));
  set("MASTER_ADDR", info.master_addr);
  set("MASTER_PORT", std::to_string(info.master_port));
}

EnvOverride::EnvOverride(EnvOverride&& other) noexcept : saved_(std::move(other.saved_)) { other.saved_.clear(); }

EnvOverride& EnvOverride::operator=(EnvOverride&& other) noexcept {
  if (this != &other) {
    restore();
    saved_ = std::move(other.saved_);
    other.saved_.clear();
  }
  return *this;
}

void EnvOverride::remember(const std::string& name) {
  if (saved_.count(name)) return;  // keep the value from before the first change
  saved_.emplace(name, launch::saved_value(name));
}

void EnvOverride::set(const std::string& name, const std::string& value) {
  remember(name);
  ::setenv(name.c_str(), value.c_str(), 1);
}

void EnvOverride::unset(const std::string& name) {
  remember(name);
  ::unsetenv(name.c_str());
}

void EnvOverride::restore() noexcept {
  for (const auto& [name, old] : saved_) {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  saved_.clear();
}

}  // namespace idist::rendezvous
