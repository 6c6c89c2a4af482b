#include "nccl/rendezvous.hpp"

#include "idist/config.hpp"
#include "idist/error.hpp"
#include "launch/launcher_env.hpp"
#include "nccl/store_key_value.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/env.hpp"
#include "rendezvous/network_interface.hpp"

namespace idist::nccl_backend {

Rendezvous rendezvous(const InitOptions& opts) {
  rendezvous::WorldInfo info = rendezvous::discover(opts);
  Rendezvous out;
  if (info.world_size > 1) {
    std::shared_ptr<store::Store> store = rendezvous::open_store(opts, info);
    rendezvous::exchange_topology(*store, info, opts.timeout);
    out.rendezvous_store = store;
    out.store = std::make_shared<StoreKeyValue>(std::move(store));
  }
  out.layout = info.layout();
  auto env = std::make_shared<rendezvous::EnvOverride>(info);
  if (info.world_size > 1 && !launch::socket_ifname("NCCL_SOCKET_IFNAME")) {
    const auto choice = rendezvous::select_interface(info.master_addr, info.nnodes, "NCCL_SOCKET_IFNAME");
    env->set("NCCL_SOCKET_IFNAME", "=" + choice.name);  // '=': NCCL matches the name exactly, not as a prefix
    out.interface = choice.describe();
  }
  out.env_guard = std::move(env);
  return out;
}

}  // namespace idist::nccl_backend
