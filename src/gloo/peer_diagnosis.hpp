#pragma once
// Which peers a failed gloo operation lost, for the error message.
#include <chrono>
#include <string>
#include <vector>

#include "gloo/pair_socket.hpp"
#include "rendezvous/peer_table.hpp"

namespace idist::gloo_backend {

/// Names the peers behind a failure of an operation over `members` (world ranks) on rank `self`:
/// - an I/O error names the peer's address ("Connection reset by peer [198.18.0.2]:41234"): the member
///   ranks listening on that address, with their host;
/// - a timeout names no peer: each other host of the members gets one TCP connection attempt, bounded
///   by `probe_timeout` in total, and the ranks of hosts that do not answer (not even with a refusal)
///   are named as unreachable.
/// Returns "" when nothing can be said, else a clause such as
/// "lost peer rank 2 (host idc2, 198.18.0.2)" or "peers unreachable: rank 2 (host idc2, ...), ...".
std::string lost_peers(const std::string& message, bool timed_out, const std::vector<int>& members, int self,
                       const rendezvous::PeerTable& table, std::chrono::milliseconds probe_timeout);

/// The IPv4 addresses written as "[a.b.c.d]" in `message`, in order of appearance, without repeats.
std::vector<std::string> bracketed_addresses(const std::string& message);

/// For each address of `addresses`, whether its host answered a TCP connection attempt to `port`
/// (accepted or refused) within `timeout` (all attempts run at once).
std::vector<bool> hosts_answering(const std::vector<std::string>& addresses, int port,
                                  std::chrono::milliseconds timeout);

/// For each endpoint, whether its host answered a TCP connection attempt to it (accepted or refused)
/// within `timeout` (all attempts run at once).
std::vector<bool> hosts_answering(const std::vector<Endpoint>& endpoints, std::chrono::milliseconds timeout);

}  // namespace idist::gloo_backend
