#pragma once
/// @file
/// The peer table: every rank's host name and transport address, exchanged once through the store
/// after each rank chose its interface. It lets every rank refuse, within seconds, a world in which a
/// rank on one host advertises a loopback address to ranks on other hosts (they could never connect and
/// would wait until the timeout), and lets failure messages name a lost peer by rank and host.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::rendezvous {

/// Where one rank lives.
struct PeerEntry {
  std::string host;     ///< host name (gethostname)
  std::string address;  ///< the IPv4 address its transport listens on
};

/// Indexed by world rank.
using PeerTable = std::vector<PeerEntry>;

/// Collective over the world: every rank publishes `mine` under "idist/peers/<rank>", rank 0 gathers
/// the entries and publishes one table, every rank reads it (O(world size) store requests in total).
/// @throws TimeoutError naming the ranks that did not publish within `timeout`; BackendError for a
///         malformed table.
PeerTable exchange_peers(store::Store& store, int rank, int world_size, const PeerEntry& mine,
                         std::chrono::milliseconds timeout);

/// The reason the world cannot connect, or nullopt: a rank whose address is a loopback address while
/// another rank runs on a different host. Names the ranks, hosts and addresses, and `ifname_variable`.
std::optional<std::string> unreachable_addresses(const PeerTable& table, const std::string& ifname_variable);

/// "rank 2 (host idc2, 198.18.0.2)", or "rank 2" when the table does not cover it.
std::string describe_rank(const PeerTable& table, int rank);

/// Text form of a table ("host address" per line), and back. decode throws BackendError when `text`
/// does not hold `world_size` entries.
std::string encode_peer_table(const PeerTable& table);
PeerTable decode_peer_table(const std::string& text, int world_size);

}  // namespace idist::rendezvous
