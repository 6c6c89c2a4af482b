#pragma once
// The TCP socket under a connected gloo pair: its two endpoints, and a shutdown that makes every
// operation waiting on the pair fail at once with gloo's own "Connection closed" I/O error.
#include <optional>
#include <string>

namespace gloo::transport {
class Pair;
}

namespace idist::gloo_backend {

/// A TCP endpoint: IPv4 address and port.
struct Endpoint {
  std::string address;  ///< dotted IPv4
  int port = 0;         ///< host byte order

  bool operator==(const Endpoint&) const = default;
};

/// The socket of one connected pair.
struct PairSocket {
  int fd = -1;      ///< the descriptor, found by its local endpoint
  Endpoint local;   ///< this side: the pair's own address
  Endpoint remote;  ///< the peer's side
};

/// Finds the socket of `pair`, a connected IPv4 pair of gloo's TCP transport: the descriptor of this
/// process whose local endpoint is the pair's address (Gloo keeps the descriptor to itself). nullopt
/// for another transport, an unconnected pair, or no such descriptor.
std::optional<PairSocket> find_pair_socket(gloo::transport::Pair& pair);

/// shutdown(SHUT_RDWR) of `socket` when its descriptor still joins the same two endpoints (never a
/// descriptor number gloo has closed and the process reused). Gloo's device thread then reads end of
/// file and fails the pair's pending operations. Returns whether it did.
bool shutdown_pair_socket(const PairSocket& socket);

}  // namespace idist::gloo_backend
