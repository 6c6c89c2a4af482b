#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/settings.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/init_method.hpp"
#include "rendezvous/store_bind.hpp"
#include "store/c10d/c10d_store.hpp"
#include "store/file_store.hpp"
#include "store/prefix_store.hpp"
#include "store/store_join.hpp"
#include "store/tcp_store.hpp"

namespace idist::rendezvous {

namespace {
// The TCPStore of "env://" and "tcp://": rank 0 listens where the ranks connect (store_bind.hpp); the
// job's token, when IDIST_STORE_TOKEN is set, admits only this job's processes.
std::shared_ptr<store::Store> open_tcp_store(const std::string& host, int port, const InitOptions& opts,
                                             const WorldInfo& info) {
  store::TCPStoreOptions options;
  if (auto token = launch::store_token()) options.token = std::move(*token);
  options.rank = info.rank;
  options.clients_wait_for_workers = true;  // a rank claimed twice then fails every rank at once
  // Before exchange_topology a provisional node count of 1 may hide other hosts: assume several.
  const int nnodes = info.topology_exact ? info.nnodes : std::max(2, info.nnodes);
  if (info.rank == 0) options.bind_addresses = store_bind_addresses(host, nnodes);
  return std::make_shared<store::TCPStore>(host, port, info.rank == 0, info.world_size, opts.timeout, true,
                                           std::move(options));
}

// torchrun's agent store: torch's prefix of this attempt, then one of idist's per initialization of this
// process, so that the keys of an earlier initialize() / finalize() in the same attempt (topology, peer
// table, Gloo's addresses) are never read again. Every rank initializes the same number of times, so the
// counter agrees across ranks; a restarted worker is a new process under a new attempt prefix.
std::shared_ptr<store::Store> open_agent_store(const InitOptions& opts, const WorldInfo& info) {
  static std::atomic<int> initializations{0};
  auto agent = std::make_shared<store::C10dStore>(
      info.master_addr, info.master_port, opts.timeout,
      store::C10dStoreOptions{.label = "torchrun agent store", .version = std::nullopt});
  const auto prefix =
      fmt::format("{}/idist/init_{}", launch::agent_store_prefix(*info.torchelastic), initializations.fetch_add(1));
  auto scoped = std::make_shared<store::PrefixStore>(prefix, std::move(agent));
  store::join_world(*scoped, info.rank, info.world_size, opts.timeout);
  return scoped;
}
}  // namespace

std::shared_ptr<store::Store> open_store(const InitOptions& opts, const WorldInfo& info) {
  const auto method = detail::parse_init_method(opts.init_method);
  switch (method.kind) {
    case detail::InitMethod::Kind::Env:
      if (info.agent_store) return open_agent_store(opts, info);
      return open_tcp_store(info.master_addr, info.master_port, opts, info);
    case detail::InitMethod::Kind::Tcp: return open_tcp_store(method.host, method.port, opts, info);
    case detail::InitMethod::Kind::File: return std::make_shared<store::FileStore>(method.path, opts.timeout);
  }
  throw ValueError("open_store: unknown init_method kind");
}

}  // namespace idist::rendezvous
