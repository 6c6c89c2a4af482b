#pragma once
/// @file
/// Which local address a rank's transport listens on (gloo's TCP pairs, the nccl bootstrap).
///
/// NCCL without NCCL_SOCKET_IFNAME, and this module without GLOO_SOCKET_IFNAME, avoid the trap of
/// binding to whatever this host's name resolves to: Debian maps a host's own name to 127.0.1.1, so
/// peers on other hosts would be told to connect to a loopback address and wait until the timeout.
/// The rule, first match wins:
/// 1. GLOO_SOCKET_IFNAME (its first comma-separated name): that interface's IPv4 address;
/// 2. MASTER_ADDR on another host: the local address the kernel's routing table picks to reach it
///    (a UDP socket connect(), which sends nothing);
/// 3. MASTER_ADDR on this host and a world on one node: the loopback, 127.0.0.1;
/// 4. MASTER_ADDR on this host and a world on several nodes: the first non-loopback interface that is up
///    (virtual bridges of container runtimes last), as NCCL's default order does.
/// Anything else is an error naming MASTER_ADDR, the candidates and GLOO_SOCKET_IFNAME, raised at once.

#include <optional>
#include <string>
#include <vector>

namespace idist::rendezvous {

/// One IPv4 address of a network interface that is up.
struct InterfaceAddress {
  std::string name;     ///< interface name, e.g. "eth0"
  std::string address;  ///< dotted IPv4 address, e.g. "198.18.0.2"
  bool loopback = false;
};

/// The interface and address chosen, and why (for logs and show_config).
struct InterfaceChoice {
  std::string name;     ///< interface name ("lo" for the loopback)
  std::string address;  ///< dotted IPv4 address to bind and publish
  std::string reason;   ///< e.g. "routes to MASTER_ADDR idc1 (198.18.0.1)"
  /// "eth0 198.18.0.2 (routes to MASTER_ADDR ...)": the line show_config prints.
  std::string describe() const;
};

/// What the selection depends on, gathered from the system by select_interface() and given directly
/// by unit tests.
struct InterfaceQuery {
  std::string master_addr;                             ///< MASTER_ADDR as given (host name or address)
  std::optional<std::string> master_ip;                ///< its IPv4 address; nullopt when it does not resolve
  std::optional<std::string> route_source;             ///< local address that routes to master_ip; nullopt: no route
  int nnodes = 1;                                      ///< nodes in the world (loopback is only right for one)
  std::optional<std::string> ifname;                   ///< GLOO_SOCKET_IFNAME (or the backend's equivalent), if set
  std::string ifname_variable = "GLOO_SOCKET_IFNAME";  ///< its name, for messages
  std::vector<InterfaceAddress> interfaces;            ///< every up interface with an IPv4 address
};

/// The IPv4 addresses of the interfaces that are up, in the kernel's order (getifaddrs).
std::vector<InterfaceAddress> list_interfaces();

/// Applies the rule of the file comment to `q`. Pure: no system calls.
/// @throws BackendError naming MASTER_ADDR, the candidate interfaces and the interface variable when no
///         usable address exists: an unknown interface name, MASTER_ADDR that does not resolve or cannot
///         be routed to, or a multi-node world on a host with only a loopback interface.
InterfaceChoice choose_interface(const InterfaceQuery& q);

/// Gathers the query from the system: resolves `master_addr` and asks the routing table (skipped when
/// the interface variable is set, unless `resolve_always`), lists the interfaces, reads `ifname_variable`.
InterfaceQuery query_interfaces(const std::string& master_addr, int nnodes, const std::string& ifname_variable,
                                bool resolve_always);

/// Gathers the query from the system (resolves `master_addr`, asks the routing table, lists the
/// interfaces, reads the variable `ifname_variable`) and applies choose_interface().
/// @throws BackendError as choose_interface().
InterfaceChoice select_interface(const std::string& master_addr, int nnodes,
                                 const std::string& ifname_variable = "GLOO_SOCKET_IFNAME");

/// True for 127.0.0.0/8, "localhost" and "::1".
bool is_loopback_address(const std::string& host);

}  // namespace idist::rendezvous
