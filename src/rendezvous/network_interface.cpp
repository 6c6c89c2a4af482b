#include "rendezvous/network_interface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/error.hpp"
#include "launch/launcher_env.hpp"

namespace idist::rendezvous {

namespace {

std::string candidates_text(const std::vector<InterfaceAddress>& interfaces) {
  if (interfaces.empty()) return "none";
  std::vector<std::string> items;
  for (const auto& i : interfaces) items.push_back(fmt::format("{} {}", i.name, i.address));
  return fmt::format("{}", fmt::join(items, ", "));
}

// Container runtimes' bridges exist on many hosts but reach no other host: NCCL excludes them by default.
bool is_virtual_bridge(const std::string& name) {
  return name.rfind("docker", 0) == 0 || name.rfind("virbr", 0) == 0 || name.rfind("veth", 0) == 0;
}

std::string name_of(const std::vector<InterfaceAddress>& interfaces, const std::string& address) {
  for (const auto& i : interfaces)
    if (i.address == address) return i.name;
  return is_loopback_address(address) ? "lo" : "?";
}

std::optional<std::string> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || !result) return std::nullopt;
  char text[INET_ADDRSTRLEN] = {};
  const auto* sin = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
  const bool ok = ::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text) != nullptr;
  ::freeaddrinfo(result);
  return ok ? std::optional<std::string>(text) : std::nullopt;
}

// The source address the kernel would use for `ip`: connect() on a UDP socket picks a route and
// binds a local address without sending a packet.
std::optional<std::string> route_source(const std::string& ip) {
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(9);  // any port: nothing is sent
  if (::inet_pton(AF_INET, ip.c_str(), &dst.sin_addr) != 1) return std::nullopt;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  sockaddr_in src{};
  socklen_t len = sizeof src;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len) == 0) {
    char text[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &src.sin_addr, text, sizeof text)) out = text;
  }
  ::close(fd);
  return out;
}

}  // namespace

std::string InterfaceChoice::describe() const { return fmt::format("{} {} ({})", name, address, reason); }

bool is_loopback_address(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::vector<InterfaceAddress> list_interfaces() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (!::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) continue;
    out.push_back({i->ifa_name, text, (i->ifa_flags & IFF_LOOPBACK) != 0 || is_loopback_address(text)});
  }
  ::freeifaddrs(list);
  return out;
}

InterfaceChoice choose_interface(const InterfaceQuery& q) {
  const std::string context =
      fmt::format("MASTER_ADDR={}{}; candidate interfaces: {}; {} {}", q.master_addr,
                  q.master_ip && *q.master_ip != q.master_addr ? fmt::format(" ({})", *q.master_ip) : "",
                  candidates_text(q.interfaces), q.ifname_variable,
                  q.ifname ? fmt::format("= '{}'", *q.ifname) : std::string("is not set"));
  if (q.ifname && !q.ifname->empty()) {
    const std::string wanted = q.ifname->substr(0, q.ifname->find(','));
    for (const auto& i : q.interfaces)
      if (i.name == wanted) return {i.name, i.address, q.ifname_variable};
    throw BackendError(
        fmt::format("cannot choose the network interface: {} names '{}', which is not an up "
                    "interface with an IPv4 address ({})",
                    q.ifname_variable, wanted, context));
  }
  if (!q.master_ip)
    throw BackendError(
        fmt::format("cannot choose the network interface: MASTER_ADDR '{}' does not resolve to an "
                    "IPv4 address ({})",
                    q.master_addr, context));
  if (!q.route_source)
    throw BackendError(
        fmt::format("cannot choose the network interface: no local address routes to MASTER_ADDR "
                    "'{}' ({}); set {} to the interface that reaches it",
                    q.master_addr, context, q.ifname_variable));
  const std::string master =
      q.master_ip == q.master_addr ? q.master_addr : fmt::format("{} ({})", q.master_addr, *q.master_ip);
  if (!is_loopback_address(*q.route_source))
    return {name_of(q.interfaces, *q.route_source), *q.route_source, fmt::format("routes to MASTER_ADDR {}", master)};
  if (q.nnodes <= 1)
    return {"lo", "127.0.0.1", fmt::format("MASTER_ADDR {} is this host and the world is on one node", master)};
  // The master runs here but peers on other hosts must reach this rank: a loopback address would send
  // them to themselves. Prefer real interfaces over container bridges.
  std::vector<InterfaceAddress> real;
  for (const auto& i : q.interfaces)
    if (!i.loopback) real.push_back(i);
  std::stable_partition(real.begin(), real.end(), [](const InterfaceAddress& i) { return !is_virtual_bridge(i.name); });
  if (real.empty())
    throw BackendError(
        fmt::format("cannot choose the network interface: MASTER_ADDR '{}' is this host and the "
                    "world spans {} nodes, but this host has no non-loopback IPv4 interface that "
                    "peers on other hosts could reach ({})",
                    q.master_addr, q.nnodes, context));
  return {real.front().name, real.front().address,
          fmt::format("MASTER_ADDR {} is this host; first non-loopback interface for a world on {} nodes", master,
                      q.nnodes)};
}

InterfaceQuery query_interfaces(const std::string& master_addr, int nnodes, const std::string& ifname_variable,
                                bool resolve_always) {
  InterfaceQuery q;
  q.master_addr = master_addr;
  q.nnodes = nnodes;
  q.ifname_variable = ifname_variable;
  q.ifname = launch::socket_ifname(ifname_variable);
  q.interfaces = list_interfaces();
  if (!q.ifname || resolve_always) {
    q.master_ip = resolve_ipv4(master_addr);
    if (q.master_ip) q.route_source = route_source(*q.master_ip);
  }
  return q;
}

InterfaceChoice select_interface(const std::string& master_addr, int nnodes, const std::string& ifname_variable) {
  return choose_interface(query_interfaces(master_addr, nnodes, ifname_variable, false));
}

}  // namespace idist::rendezvous
