#include "rendezvous/peer_table.hpp"

#include "rendezvous/store_gather.hpp"

#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/error.hpp"
#include "rendezvous/network_interface.hpp"
#include "rendezvous/store_gather.hpp"

namespace idist::rendezvous {

namespace {
constexpr const char* kPrefix = "idist/peers/";
}

std::string encode_peer_table(const PeerTable& table) {
  std::string out;
  for (const auto& e : table) out += fmt::format("{} {}\n", e.host, e.address);
  return out;
}

PeerTable decode_peer_table(const std::string& text, int world_size) {
  PeerTable table(static_cast<std::size_t>(world_size));
  std::istringstream in(text);
  for (auto& e : table)
    if (!(in >> e.host >> e.address)) throw BackendError("rendezvous: malformed peer table in the store");
  return table;
}

PeerTable exchange_peers(store::Store& store, int rank, int world_size, const PeerEntry& mine,
                         std::chrono::milliseconds timeout) {
  if (world_size == 1) return {mine};
  const std::string table = gather_and_publish(store, kPrefix, rank, world_size, mine.host + " " + mine.address,
                                               "their address", timeout, [](const std::vector<std::string>& values) {
                                                 PeerTable all;
                                                 for (const std::string& v : values)
                                                   all.push_back(decode_peer_table(v, 1).front());
                                                 return encode_peer_table(all);
                                               });
  return decode_peer_table(table, world_size);
}

std::optional<std::string> unreachable_addresses(const PeerTable& table, const std::string& ifname_variable) {
  std::map<std::string, std::vector<int>> ranks_of_host;
  for (std::size_t r = 0; r < table.size(); ++r) ranks_of_host[table[r].host].push_back(int(r));
  if (ranks_of_host.size() < 2) return std::nullopt;  // one host: the loopback reaches everybody
  std::vector<std::string> bad;
  for (std::size_t r = 0; r < table.size(); ++r)
    if (is_loopback_address(table[r].address)) bad.push_back(describe_rank(table, int(r)));
  if (bad.empty()) return std::nullopt;
  std::vector<std::string> hosts;
  for (const auto& [host, ranks] : ranks_of_host)
    hosts.push_back(fmt::format("{} (ranks {})", host, fmt::join(ranks, ", ")));
  return fmt::format(
      "the world spans {} hosts ({}), but {} listen{} on a loopback address that peers on other "
      "hosts cannot reach; unset {} or set it to an interface that reaches the other hosts",
      hosts.size(), fmt::join(hosts, "; "), fmt::join(bad, ", "), bad.size() == 1 ? "s" : "", ifname_variable);
}

std::string describe_rank(const PeerTable& table, int rank) {
  if (rank < 0 || std::size_t(rank) >= table.size()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} (host {}, {})", rank, table[std::size_t(rank)].host, table[std::size_t(rank)].address);
}

}  // namespace idist::rendezvous
