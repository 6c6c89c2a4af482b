#include "nccl/nccl_rendezvous.hpp"

#include "idist/config.hpp"
#include "idist/error.hpp"

#include <cstdlib>

#if IDIST_HAVE_GLOO
// The rendezvous store implements Gloo's rendezvous::Store, so it is built together with Gloo.
#include "nccl/store_key_value.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/env.hpp"
#include "rendezvous/network_interface.hpp"
#else
#include <algorithm>
#include <cstdlib>
#include <string>
#endif

namespace idist::nccl_backend {

#if IDIST_HAVE_GLOO

Rendezvous rendezvous(const InitOptions& opts) {
  rendezvous::WorldInfo info = rendezvous::discover(opts);
  Rendezvous out;
  if (info.world_size > 1) {
    std::shared_ptr<store::Store> store = rendezvous::open_store(opts, info);
    rendezvous::exchange_topology(*store, info, opts.timeout);
    out.store = std::make_shared<StoreKeyValue>(std::move(store));
  }
  out.layout = WorldLayout{info.rank, info.local_rank, info.world_size, info.nproc_per_node, info.node_rank, info.nnodes};
  auto env = std::make_shared<rendezvous::EnvOverride>(info);
  const char* ifname = std::getenv("NCCL_SOCKET_IFNAME");
  if (info.world_size > 1 && !(ifname && *ifname)) {
    const auto choice = rendezvous::select_interface(info.master_addr, info.nnodes, "NCCL_SOCKET_IFNAME");
    env->set("NCCL_SOCKET_IFNAME", "=" + choice.name);  // '=': NCCL matches the name exactly, not as a prefix
    out.interface = choice.describe();
  }
  out.env_guard = std::move(env);
  return out;
}

#else

namespace {
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}
}  // namespace

Rendezvous rendezvous(const InitOptions& opts) {
  // Without the store only a world of one process can form; refuse anything that looks larger
  // instead of silently running N independent worlds.
  const int launched = std::max({opts.world_size, env_int("WORLD_SIZE"), env_int("OMPI_COMM_WORLD_SIZE"),
                                 env_int("PMI_SIZE"), env_int("SLURM_NTASKS")});
  if (launched > 1)
    throw BackendError("the nccl backend needs idist's rendezvous store for a world of " + std::to_string(launched) +
                       " processes, and this build of idist has none (the store is built with the gloo backend: "
                       "install Gloo and rebuild)");
  if (opts.rank > 0)
    throw ValueError("initialize: rank should be 0 in a world of 1 process, but given " + std::to_string(opts.rank));
  Rendezvous out;
  out.layout.local_rank = opts.local_rank > 0 ? opts.local_rank : 0;
  return out;
}

#endif

}  // namespace idist::nccl_backend
