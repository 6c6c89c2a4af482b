#pragma once
// Internals of exchange_topology(), exposed for unit tests.
#include <string>
#include <vector>

namespace idist::rendezvous::detail {

/// What one rank publishes: its local rank (-1: unknown) and host name.
struct TopologyEntry {
  int local_rank = -1;
  std::string host;
};

/// The layout rank 0 computes and publishes.
struct Topology {
  std::string error;  ///< non-empty: the layout is inconsistent (every rank throws ValueError)
  int nproc_per_node = 1;
  std::vector<int> local_rank;  ///< per rank
  std::vector<int> node_rank;   ///< per rank
};

/// ignite's rules: known local ranks are kept; unknown ones come from the host names (hosts in order of first
/// appearance, each host's ranks contiguous); nproc_per_node = `nproc_env` when > 0, else max local rank + 1;
/// node rank = the host's index for heuristic ranks, else rank / nproc_per_node. A guessed local rank equal to
/// another rank's on the same host is an error (the ranks of a host were not contiguous); equal given local
/// ranks are accepted (several emulated nodes on one host).
Topology compute_topology(const std::vector<TopologyEntry>& entries, int nproc_env);

/// Text form published in the store, and back. decode returns nullopt-like empty error on success.
std::string encode_topology(const Topology& t);
/// @throws BackendError when `text` is malformed.
Topology decode_topology(const std::string& text, int world_size);

}  // namespace idist::rendezvous::detail
