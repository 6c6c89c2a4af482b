#pragma once
// The serving half of TCPStore: an Asio acceptor and one session per client on a dedicated thread.
// Internal; the protocol is documented in tcp_store_protocol.hpp.

#include <chrono>
#include <memory>

namespace idist::store::detail {

struct ServerImpl;

/// Serves the store on every interface at `port` (0: a free port) from its own thread.
class TCPStoreServer {
 public:
  /// @param world_size expected clients, reported in TIMEOUT replies (<= 0: unknown).
  /// @throws BackendError when the port cannot be bound.
  TCPStoreServer(int port, int world_size);
  /// Stops serving: closes every connection and joins the server thread.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  /// The bound port.
  int port() const;
  /// Number of client connections open now.
  int num_connections() const;
  /// Blocks until no client connection is open, at most `timeout`; true when none is open.
  bool wait_until_no_clients(std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace idist::store::detail
