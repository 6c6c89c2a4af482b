#include "rendezvous/store_bind.hpp"

#include <algorithm>

#include "idist/error.hpp"

namespace idist::rendezvous {

std::vector<std::string> choose_store_bind_addresses(const InterfaceQuery& q) {
  if (q.master_addr == "localhost") return {"127.0.0.1"};
  if (is_loopback_address(q.master_addr)) return {q.master_addr};
  if (!q.master_ip) return {};
  if (is_loopback_address(*q.master_ip)) {
    std::vector<std::string> out{*q.master_ip};
    if (q.nnodes > 1) {
      try {
        auto choice = choose_interface(q);
        if (is_loopback_address(choice.address) && q.ifname) {
          // A loopback GLOO_SOCKET_IFNAME across hosts is refused by the peer table check, which needs the
          // other hosts to reach the store first: the store takes the interface chosen without it.
          InterfaceQuery without = q;
          without.ifname.reset();
          choice = choose_interface(without);
        }
        if (!is_loopback_address(choice.address)) out.push_back(choice.address);
      } catch (const BackendError&) {
        // No interface other hosts could reach: the backend's own interface choice reports that, naming
        // the candidates; the store stays on the loopback.
      }
    }
    return out;
  }
  const bool local = std::any_of(q.interfaces.begin(), q.interfaces.end(),
                                 [&](const InterfaceAddress& i) { return i.address == *q.master_ip; });
  if (local) return {*q.master_ip};
  return {};
}

std::vector<std::string> store_bind_addresses(const std::string& master, int nnodes) {
  if (is_loopback_address(master)) {
    InterfaceQuery q;
    q.master_addr = master;
    return choose_store_bind_addresses(q);
  }
  return choose_store_bind_addresses(query_interfaces(master, nnodes, "GLOO_SOCKET_IFNAME", true));
}

}  // namespace idist::rendezvous
