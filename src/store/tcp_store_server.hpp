#pragma once
// The serving half of TCPStore: Asio acceptors and one session per client on a dedicated thread.
// Internal; the protocol is documented in tcp_store_protocol.hpp.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace idist::store::detail {

struct ServerImpl;

/// What the server admits and how much it may hold. The defaults are the production values; tests
/// shrink them.
struct ServerConfig {
  /// Per-job secret every HELLO must carry; empty: any HELLO is admitted.
  std::string token;
  /// Addresses to listen on (one acceptor each); empty: every interface.
  std::vector<std::string> bind_addresses;
  /// A connection without a HELLO after this long is closed (authenticated ones never time out).
  std::chrono::milliseconds handshake_timeout{3000};
  /// Most connections open at once; 0: half the process's file descriptor limit, in [64, 4096].
  int max_connections = 0;
  /// Most bytes buffered by all connections together for requests over 4 KiB (one largest request fits);
  /// smaller requests are bounded by max_connections instead.
  std::size_t max_buffered_bytes = std::size_t{80} << 20;
};

/// Counters of a server, for tests and measurements.
struct ServerStats {
  int connections = 0;                  ///< open now
  std::size_t buffered_bytes = 0;       ///< request bytes buffered now
  std::size_t peak_buffered_bytes = 0;  ///< the most ever buffered at once
  std::uint64_t refused = 0;            ///< connections refused or closed for misbehaving
};

/// Serves the store at `port` (0: a free port) from its own thread.
class TCPStoreServer {
 public:
  /// @param world_size expected clients, reported in TIMEOUT replies (<= 0: unknown).
  /// @throws BackendError when the port cannot be bound on one of the addresses; ValueError when an
  ///         address of config.bind_addresses is not an IP address.
  TCPStoreServer(int port, int world_size, ServerConfig config = {});
  /// Stops serving: closes every connection and joins the server thread.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  /// The bound port.
  int port() const;
  /// The addresses listened on ("127.0.0.1", "::" for every interface).
  std::vector<std::string> addresses() const;
  /// Number of client connections open now.
  int num_connections() const;
  /// A snapshot of the counters.
  ServerStats stats() const;
  /// Blocks until no client connection is open, at most `timeout`; true when none is open.
  bool wait_until_no_clients(std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace idist::store::detail
