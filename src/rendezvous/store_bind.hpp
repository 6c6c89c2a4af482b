#pragma once
/// @file
/// Which addresses rank 0's TCPStore server listens on. Listening on every interface would expose the
/// store to whole networks that no rank uses, so the server listens only where the ranks connect. The
/// rule, first match wins (`master` is MASTER_ADDR or the host of "tcp://host:port"):
/// 1. `master` is a loopback address or "localhost": that loopback address only (no other host could
///    reach the server through it anyway);
/// 2. `master` does not resolve: every interface (the clients cannot resolve it either and will say so);
/// 3. `master` resolves to a loopback address (a host name that /etc/hosts maps to 127.0.1.1 on the master
///    host itself, as Debian does): that address, for the ranks of this host, plus, when the world may span
///    several nodes, the interface select_interface() picks for such a world (GLOO_SOCKET_IFNAME unless it
///    names the loopback, else the first non-loopback interface), where the other hosts reach this one;
/// 4. `master` resolves to an address of this host: that address only;
/// 5. otherwise (a forwarded port, a virtual IP): every interface.
/// Every case is further protected by the job's token (IDIST_STORE_TOKEN) when one is set.

#include <string>
#include <vector>

#include "rendezvous/network_interface.hpp"

namespace idist::rendezvous {

/// Applies the rule of the file comment to `q` (q.nnodes > 1: the world may span several nodes).
/// Pure: no system calls. An empty result means every interface.
std::vector<std::string> choose_store_bind_addresses(const InterfaceQuery& q);

/// Gathers the query from the system and applies choose_store_bind_addresses().
std::vector<std::string> store_bind_addresses(const std::string& master, int nnodes);

}  // namespace idist::rendezvous
