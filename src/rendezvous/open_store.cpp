#include <algorithm>
#include <cstdlib>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/init_method.hpp"
#include "rendezvous/store_bind.hpp"
#include "store/file_store.hpp"
#include "store/tcp_store.hpp"

namespace idist::rendezvous {

namespace {
// The TCPStore of "env://" and "tcp://": rank 0 listens where the ranks connect (store_bind.hpp); the
// job's token, when IDIST_STORE_TOKEN is set, admits only this job's processes.
std::shared_ptr<store::Store> open_tcp_store(const std::string& host, int port, const InitOptions& opts,
                                             const WorldInfo& info) {
  store::TCPStoreOptions options;
  if (const char* token = std::getenv("IDIST_STORE_TOKEN"); token) options.token = token;
  options.rank = info.rank;
  options.clients_wait_for_workers = true;  // a rank claimed twice then fails every rank at once
  // Before exchange_topology a provisional node count of 1 may hide other hosts: assume several.
  const int nnodes = info.topology_exact ? info.nnodes : std::max(2, info.nnodes);
  if (info.rank == 0) options.bind_addresses = store_bind_addresses(host, nnodes);
  return std::make_shared<store::TCPStore>(host, port, info.rank == 0, info.world_size, opts.timeout, true,
                                           std::move(options));
}
}  // namespace

std::shared_ptr<store::Store> open_store(const InitOptions& opts, const WorldInfo& info) {
  const auto method = detail::parse_init_method(opts.init_method);
  switch (method.kind) {
    case detail::InitMethod::Kind::Env: return open_tcp_store(info.master_addr, info.master_port, opts, info);
    case detail::InitMethod::Kind::Tcp: return open_tcp_store(method.host, method.port, opts, info);
    case detail::InitMethod::Kind::File: return std::make_shared<store::FileStore>(method.path, opts.timeout);
  }
  throw ValueError("open_store: unknown init_method kind");
}

}  // namespace idist::rendezvous
