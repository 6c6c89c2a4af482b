// exchange_topology: ignite's _setup_attrs (nproc_per_node = max local rank + 1, nnodes, node rank) and
// _compute_local_rank_via_hostname, done through the rendezvous store before any communicator exists.
// Rank 0 reads every rank's entry and publishes one result, so the exchange costs O(world size) requests
// in total rather than per rank.
#include "rendezvous/topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/store_gather.hpp"

namespace idist::rendezvous {

namespace detail {

Topology compute_topology(const std::vector<TopologyEntry>& entries, int nproc_env) {
  const int world = static_cast<int>(entries.size());
  Topology t;
  t.local_rank.assign(world, 0);
  t.node_rank.assign(world, -1);
  // Hosts in order of first appearance; node i starts at the first rank after the ranks of nodes < i.
  std::vector<std::string> hosts;
  std::map<std::string, int> count;
  for (const auto& e : entries) {
    if (!count.count(e.host)) hosts.push_back(e.host);
    ++count[e.host];
  }
  std::vector<int> first_rank_of_node;
  for (int sum = 0; const auto& h : hosts) {
    first_rank_of_node.push_back(sum);
    sum += count[h];
  }
  for (int r = 0; r < world; ++r) {
    if (entries[r].local_rank >= 0) {
      t.local_rank[r] = entries[r].local_rank;
      continue;
    }
    const auto it = std::upper_bound(first_rank_of_node.begin(), first_rank_of_node.end(), r);
    t.node_rank[r] = static_cast<int>(it - first_rank_of_node.begin()) - 1;
    t.local_rank[r] = r - first_rank_of_node[t.node_rank[r]];
  }
  // A guessed local rank that collides with another rank's on the same host means the guess (contiguous
  // ranks per host) was wrong: refuse rather than hand two ranks one device. Collisions between given local
  // ranks are left alone: emulating several nodes on one host (ignite's 2-node test) produces them.
  std::map<std::pair<std::string, int>, int> seen;
  for (int r = 0; r < world; ++r) {
    const auto [it, fresh] = seen.emplace(std::pair{entries[r].host, t.local_rank[r]}, r);
    const bool guessed = entries[r].local_rank < 0 || entries[it->second].local_rank < 0;
    if (!fresh && guessed) {
      t.error = fmt::format(
          "ranks {} and {} on host '{}' both have local rank {}: local ranks guessed from host "
          "names need the ranks of each host to be contiguous; set LOCAL_RANK (or the options' "
          "local_rank) on every rank",
          it->second, r, entries[r].host, t.local_rank[r]);
      return t;
    }
  }
  t.nproc_per_node = nproc_env > 0 ? nproc_env : *std::max_element(t.local_rank.begin(), t.local_rank.end()) + 1;
  for (int r = 0; r < world; ++r)
    if (t.node_rank[r] < 0) t.node_rank[r] = r / t.nproc_per_node;
  return t;
}

std::string encode_topology(const Topology& t) {
  if (!t.error.empty()) return "error\n" + t.error;
  std::string out = fmt::format("ok\n{}\n", t.nproc_per_node);
  for (std::size_t r = 0; r < t.local_rank.size(); ++r) out += fmt::format("{} {}\n", t.local_rank[r], t.node_rank[r]);
  return out;
}

Topology decode_topology(const std::string& text, int world_size) {
  Topology t;
  std::istringstream in(text);
  std::string status;
  std::getline(in, status);
  if (status == "error") {
    std::getline(in, t.error, '\0');
    return t;
  }
  in >> t.nproc_per_node;
  t.local_rank.resize(world_size);
  t.node_rank.resize(world_size);
  for (int r = 0; r < world_size; ++r) in >> t.local_rank[r] >> t.node_rank[r];
  if (status != "ok" || !in || t.nproc_per_node < 1)
    throw BackendError("rendezvous: malformed topology record in the store");
  return t;
}

}  // namespace detail

namespace {
constexpr const char* kPrefix = "idist/topology/";

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}
}  // namespace

void exchange_topology(store::Store& store, WorldInfo& info, std::chrono::milliseconds timeout) {
  if (info.topology_exact && info.local_rank_known) return;
  if (info.world_size == 1) {
    info.local_rank = 0;
    info.local_rank_known = true;
    set_nproc_per_node(info, 1);
    return;
  }
  const std::string mine = fmt::format("{}\n{}\n{}", info.local_rank_known ? info.local_rank : -1,
                                       info.nproc_from_env ? info.nproc_per_node : 0, this_hostname());
  const std::string result =
      gather_and_publish(store, kPrefix, info.rank, info.world_size, mine, "their local rank", timeout,
                         [](const std::vector<std::string>& values) {
                           std::vector<detail::TopologyEntry> entries(values.size());
                           int nproc_env = 0;
                           for (std::size_t r = 0; r < values.size(); ++r) {
                             std::istringstream in(values[r]);
                             int nproc = 0;
                             in >> entries[r].local_rank >> nproc;
                             in.ignore(1);
                             std::getline(in, entries[r].host);
                             if (r == 0) nproc_env = nproc;
                           }
                           return detail::encode_topology(detail::compute_topology(entries, nproc_env));
                         });
  const auto t = detail::decode_topology(result, info.world_size);
  if (!t.error.empty()) throw ValueError(fmt::format("rendezvous: {}", t.error));
  info.local_rank = t.local_rank[info.rank];
  info.local_rank_known = true;
  set_nproc_per_node(info, t.nproc_per_node);
  info.node_rank = t.node_rank[info.rank];
}

}  // namespace idist::rendezvous
