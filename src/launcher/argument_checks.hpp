#pragma once
// Argument checks of spawn() and Parallel, with ignite.distributed.launcher's messages.
#include <string>
#include <string_view>
#include <vector>

#include "idist/launcher.hpp"

namespace idist::launcher {

/// "'gloo', 'mpi'": the available backends, quoted, for messages.
std::string quoted_backends();

/// True when `backend` is one of available_backends().
bool is_available(std::string_view backend);

/// ignite's Parallel._setup_spawn_params: validates and completes the spawn parameters of Parallel.
/// @throws ValueError with ignite's messages.
SpawnOptions setup_spawn_params(std::string_view backend, const ParallelOptions& opts);

}  // namespace idist::launcher
