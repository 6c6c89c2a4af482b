#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/init_method.hpp"
#include "store/file_store.hpp"
#include "store/tcp_store.hpp"

namespace idist::rendezvous {

std::shared_ptr<store::Store> open_store(const InitOptions& opts, const WorldInfo& info) {
  const auto method = detail::parse_init_method(opts.init_method);
  switch (method.kind) {
    case detail::InitMethod::Kind::Env:
      return std::make_shared<store::TCPStore>(info.master_addr, info.master_port, info.rank == 0, info.world_size,
                                               opts.timeout);
    case detail::InitMethod::Kind::Tcp:
      return std::make_shared<store::TCPStore>(method.host, method.port, info.rank == 0, info.world_size,
                                               opts.timeout);
    case detail::InitMethod::Kind::File:
      return std::make_shared<store::FileStore>(method.path, opts.timeout);
  }
  throw ValueError("open_store: unknown init_method kind");
}

}  // namespace idist::rendezvous
