#pragma once
// The backends compiled into this build, and how to create or adopt each one's model.
#include <memory>
#include <span>
#include <string_view>

#include "core/backend.hpp"
#include "idist/context.hpp"

namespace idist::core {

/// One compiled-in backend.
struct BackendEntry {
  std::string_view name;  ///< "serial", "nccl", "gloo" or "mpi"
  /// Creates and initializes the backend's model (collective over the world).
  std::unique_ptr<Backend> (*create)(const InitOptions& opts);
  /// Returns a model wrapping a context created outside idist, or null when there is none
  /// (ignite's create_from_context). May itself be null when the backend has no such notion.
  std::unique_ptr<Backend> (*adopt)();
  /// Whether such a context exists now: cheap, makes no collective call (sync() asks it whether an
  /// adopted context is still alive). Null exactly when adopt is.
  bool (*has_context)();
};

/// Compiled-in distributed backends in ignite's order: nccl, gloo, mpi.
std::span<const BackendEntry> backends();

/// The serial model's entry: what idist runs on before initialize() and after finalize().
const BackendEntry& serial();

}  // namespace idist::core
