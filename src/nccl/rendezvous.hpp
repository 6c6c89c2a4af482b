#pragma once
// Where the nccl backend's ranks meet: rank discovery and the key-value store the unique ids travel
// through (idist's rendezvous store, src/store and src/rendezvous), behind a small interface.
#include <memory>
#include <optional>
#include <string>

#include "idist/context.hpp"
#include "nccl/unique_id.hpp"
#include "store/store.hpp"

namespace idist::nccl_backend {

/// This process's place in the world.

/// What the rendezvous produced. `store` is null for a world of one process (nothing to exchange);
/// `env_guard` restores the environment variables it exported (RANK, LOCAL_RANK, WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT, as ignite's native model does) when destroyed.
struct Rendezvous {
  WorldLayout layout;
  std::shared_ptr<KeyValueStore> store;
  /// The same store, whole: IDIST_DISTRIBUTED_DEBUG=INFO records each rank's progress in it.
  std::shared_ptr<store::Store> rendezvous_store;
  std::shared_ptr<void> env_guard;
  /// The bootstrap interface idist chose ("eth0 198.18.0.2 (why)"), exported as NCCL_SOCKET_IFNAME
  /// for NCCL's bootstrap when the user did not set that variable; nullopt otherwise.
  std::optional<std::string> interface;
};

/// Discovers ranks from `opts` and the environment (the contract's order: options, SLURM, torchrun
/// variables, Open MPI, PMI), opens the store of opts.init_method when the world has more than one
/// process, and completes the node layout through it. Collective over the world. Without
/// NCCL_SOCKET_IFNAME, exports it (exact match) as the interface that routes to MASTER_ADDR
/// (rendezvous::select_interface), so NCCL's bootstrap never advertises a loopback address to other hosts.
/// @throws ValueError for inconsistent rank information; TimeoutError when ranks do not meet within
///         opts.timeout.
Rendezvous rendezvous(const InitOptions& opts);

}  // namespace idist::nccl_backend
