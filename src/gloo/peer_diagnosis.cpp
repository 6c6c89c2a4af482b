#include "gloo/peer_diagnosis.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rendezvous/network_interface.hpp"

namespace idist::gloo_backend {

std::vector<std::string> bracketed_addresses(const std::string& message) {
  static const std::regex pattern(R"(\[(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\])");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(message.begin(), message.end(), pattern); it != std::sregex_iterator(); ++it)
    if (std::find(out.begin(), out.end(), (*it)[1].str()) == out.end()) out.push_back((*it)[1].str());
  return out;
}

std::vector<bool> hosts_answering(const std::vector<std::string>& addresses, int port,
                                  std::chrono::milliseconds timeout) {
  std::vector<Endpoint> endpoints;
  for (const auto& a : addresses) endpoints.push_back({a, port});
  return hosts_answering(endpoints, timeout);
}

std::vector<bool> hosts_answering(const std::vector<Endpoint>& endpoints, std::chrono::milliseconds timeout) {
  std::vector<bool> answered(endpoints.size(), false);
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(endpoints[i].port));
    if (::inet_pton(AF_INET, endpoints[i].address.c_str(), &addr.sin_addr) != 1) continue;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    if (rc == 0 || errno == ECONNREFUSED) {
      answered[i] = true;
      ::close(fd);
    } else if (errno == EINPROGRESS) {
      fds.push_back({fd, POLLOUT, 0});
      index.push_back(i);
    } else {
      ::close(fd);  // EHOSTUNREACH, ENETUNREACH: no answer
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t open = fds.size();
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(fds.data(), fds.size(), int(left.count())) <= 0) break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      answered[index[k]] = err == 0 || err == ECONNREFUSED;  // a refusal proves the host is up
      ::close(fds[k].fd);
      fds[k].fd = -1;
      --open;
    }
  }
  for (const auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  return answered;
}

std::string lost_peers(const std::string& message, bool timed_out, const std::vector<int>& members, int self,
                       const rendezvous::PeerTable& table, std::chrono::milliseconds probe_timeout) {
  if (table.empty()) return "";
  const std::string& my_address = std::size_t(self) < table.size() ? table[std::size_t(self)].address : "";
  const auto ranks_at = [&](const std::string& address) {
    std::vector<std::string> out;
    for (int r : members)
      if (r != self && std::size_t(r) < table.size() && table[std::size_t(r)].address == address)
        out.push_back(rendezvous::describe_rank(table, r));
    return out;
  };
  std::vector<std::string> named;
  for (const auto& address : bracketed_addresses(message))
    for (auto& d : ranks_at(address)) named.push_back(std::move(d));
  if (!named.empty())
    return fmt::format("lost peer{} {}", named.size() == 1 ? "" : "s (one of)", fmt::join(named, ", "));
  if (!timed_out) return "";
  std::vector<std::string> hosts;  // other hosts' addresses among the members
  for (int r : members) {
    if (r == self || std::size_t(r) >= table.size()) continue;
    const std::string& a = table[std::size_t(r)].address;
    if (a != my_address && !rendezvous::is_loopback_address(a) &&
        std::find(hosts.begin(), hosts.end(), a) == hosts.end())
      hosts.push_back(a);
  }
  if (hosts.empty()) return "";
  const std::vector<bool> answered = hosts_answering(hosts, 9, probe_timeout);
  std::vector<std::string> lost;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    if (!answered[i])
      for (auto& d : ranks_at(hosts[i])) lost.push_back(std::move(d));
  if (lost.empty())
    return fmt::format(
        "every peer host answers on the network: a peer process may be stopped, slow, or in a "
        "different collective");
  return fmt::format("peers unreachable on the network: {}", fmt::join(lost, ", "));
}

}  // namespace idist::gloo_backend
