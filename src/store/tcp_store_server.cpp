// The TCPStore server: its acceptors, the connection cap and the server thread. The sessions
// (tcp_store_session.hpp) carry out the protocol; the key-value state (tcp_store_state.hpp) holds the data.
#include "store/tcp_store_server.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "store/tcp_store_server_impl.hpp"
#include "store/tcp_store_session.hpp"

namespace idist::store::detail {

namespace {
using asio::ip::tcp;

int default_max_connections() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<int>(std::clamp<rlim_t>(lim.rlim_cur / 2, 64, 4096));
}
}  // namespace

ServerImpl::ServerImpl(int port_, int world_size, ServerConfig config_)
    : config(std::move(config_)), state(world_size) {
  if (config.max_connections <= 0) config.max_connections = default_max_connections();
  if (config.bind_addresses.empty()) {
    listen("", port_);
  } else {
    // Port 0: the first address picks a free port and the others listen on the same one.
    for (const auto& address : config.bind_addresses) listen(address, port == 0 ? port_ : port);
  }
  for (auto& acceptor : acceptors) accept(acceptor);
  thread = std::thread([this] {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {  // a handler failed (e.g. out of memory): keep serving the others
        std::fprintf(stderr, "idist TCPStore server: %s\n", e.what());
      }
    }
  });
}

ServerImpl::~ServerImpl() {
  io.stop();
  if (thread.joinable()) thread.join();
  // Sessions still referenced only by handlers are destroyed with io; closing them first ends their waits.
  for (auto& weak : sessions)
    if (auto s = weak.lock()) s->close();
  std::error_code ec;
  for (auto& acceptor : acceptors) acceptor.close(ec);
}

// Listens on `address` ("": every interface, IPv6 dual-stack when the host has IPv6, else IPv4).
void ServerImpl::listen(const std::string& address, int at_port) {
  std::error_code ec;
  auto& acceptor = acceptors.emplace_back(io);
  auto listen_on = [&](const tcp::endpoint& ep, bool dual_stack) {
    ec.clear();
    acceptor.open(ep.protocol(), ec);
    if (!ec && dual_stack) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      std::error_code ignored;
      acceptor.close(ignored);
    }
  };
  const auto p = static_cast<unsigned short>(at_port);
  std::string shown = address;
  if (address.empty()) {
    listen_on(tcp::endpoint(tcp::v6(), p), true);
    if (ec && ec != asio::error::address_in_use) listen_on(tcp::endpoint(tcp::v4(), p), false);
    shown = "every interface";
  } else {
    std::error_code parse;
    const auto ip = asio::ip::make_address(address, parse);
    if (parse)
      throw ValueError(fmt::format("TCPStore server: bind address should be an IP address, got '{}'", address));
    listen_on(tcp::endpoint(ip, p), false);
  }
  if (ec)
    throw BackendError(
        fmt::format("TCPStore server: cannot listen on port {} of {}: {}", at_port, shown, ec.message()));
  port = acceptor.local_endpoint().port();
  addresses.push_back(address.empty() ? std::string("::") : address);
}

void ServerImpl::accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this, &acceptor](std::error_code e) {
        if (!e) accept(acceptor);
      });
      return;
    }
    std::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    sessions.remove_if([](const std::weak_ptr<Session>& s) { return s.expired() || s.lock()->closed(); });
    if (num_connections_now() >= config.max_connections && !evict_unauthenticated()) {
      const auto ep = socket.remote_endpoint(ignored);
      refuse("connection cap reached, every connection authenticated",
             fmt::format("{}:{}", ep.address().to_string(), ep.port()), fmt::format("cap {}", config.max_connections));
      socket.close(ignored);
    } else {
      auto session = std::make_shared<Session>(*this, std::move(socket));
      sessions.push_back(session);
      session_opened();
      session->start();
    }
    accept(acceptor);
  });
}

bool ServerImpl::evict_unauthenticated() {
  for (auto& weak : sessions) {
    auto s = weak.lock();
    if (s && !s->closed() && !s->authenticated()) {
      s->refuse("connection cap reached: oldest connection without a handshake closed",
                fmt::format("cap {}", config.max_connections));
      return true;
    }
  }
  return false;
}

TCPStoreServer::TCPStoreServer(int port, int world_size, ServerConfig config)
    : impl_(std::make_unique<ServerImpl>(port, world_size, std::move(config))) {}

TCPStoreServer::~TCPStoreServer() = default;

int TCPStoreServer::port() const { return impl_->port; }

std::vector<std::string> TCPStoreServer::addresses() const { return impl_->addresses; }

int TCPStoreServer::num_connections() const { return stats().connections; }

ServerStats TCPStoreServer::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

bool TCPStoreServer::wait_until_no_clients(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->stats.connections == 0; });
}

}  // namespace idist::store::detail
