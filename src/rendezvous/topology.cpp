// exchange_topology: ignite's _setup_attrs (nproc_per_node = max local rank + 1, nnodes, node rank) and
// _compute_local_rank_via_hostname, done through the rendezvous store before any communicator exists.
// Rank 0 reads every rank's entry and publishes one result, so the exchange costs O(world size) requests
// in total rather than per rank.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"

namespace idist::rendezvous {

namespace {
constexpr const char* kPrefix = "idist/topology/";

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

struct Entry {
  int local_rank = -1;  // -1: unknown
  std::string host;
};

// rank 0: every rank's (local rank, node rank) and nproc_per_node, or an error message.
std::string compute_result(const std::vector<Entry>& entries, int nproc_env) {
  const int world = static_cast<int>(entries.size());
  std::vector<int> local(world), node(world, -1);
  // ignite's hostname heuristic for ranks without a local rank: hosts in order of first appearance, ranks
  // of one host contiguous; node = index of the host, local = rank - first rank of the host.
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
      local[r] = entries[r].local_rank;
      continue;
    }
    const auto it = std::upper_bound(first_rank_of_node.begin(), first_rank_of_node.end(), r);
    node[r] = static_cast<int>(it - first_rank_of_node.begin()) - 1;
    local[r] = r - first_rank_of_node[node[r]];
  }
  // Two ranks of one host with the same local rank would pick the same device: refuse.
  std::map<std::pair<std::string, int>, int> seen;
  for (int r = 0; r < world; ++r) {
    const auto [it, fresh] = seen.emplace(std::pair{entries[r].host, local[r]}, r);
    if (!fresh)
      return fmt::format("error\nranks {} and {} on host '{}' both have local rank {}; check LOCAL_RANK (or the "
                         "launcher's local ranks)",
                         it->second, r, entries[r].host, local[r]);
  }
  const int nproc = nproc_env > 0 ? nproc_env : *std::max_element(local.begin(), local.end()) + 1;
  std::string out = fmt::format("ok\n{}\n", nproc);
  for (int r = 0; r < world; ++r) out += fmt::format("{} {}\n", local[r], node[r] >= 0 ? node[r] : r / nproc);
  return out;
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
  const auto key_of = [](int r) { return fmt::format("{}{}", kPrefix, r); };
  const auto result_key = fmt::format("{}result", kPrefix);
  store.set_string(key_of(info.rank), fmt::format("{}\n{}\n{}", info.local_rank_known ? info.local_rank : -1,
                                                  info.nproc_from_env ? info.nproc_per_node : 0, this_hostname()));
  if (info.rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < info.world_size; ++r) keys.push_back(key_of(r));
    try {
      store.wait(keys, timeout);
    } catch (const TimeoutError& e) {
      std::vector<int> missing;
      for (int r = 0; r < info.world_size && missing.size() < 16; ++r)
        if (!store.check({key_of(r)})) missing.push_back(r);
      throw TimeoutError(fmt::format("rendezvous: ranks [{}] of {} did not publish their local rank within {} ms "
                                     "(are they running?): {}",
                                     fmt::join(missing, ", "), info.world_size, timeout.count(), e.what()));
    }
    std::vector<Entry> entries(info.world_size);
    int nproc_env = 0;
    for (int r = 0; r < info.world_size; ++r) {
      std::istringstream in(store.get_string(key_of(r)));
      int nproc = 0;
      in >> entries[r].local_rank >> nproc;
      in.ignore(1);
      std::getline(in, entries[r].host);
      if (r == 0) nproc_env = nproc;
    }
    store.set_string(result_key, compute_result(entries, nproc_env));
  }
  store.wait({result_key}, timeout);
  const auto result = store.get_string(result_key);
  std::istringstream in(result);
  std::string status;
  std::getline(in, status);
  if (status != "ok") {
    std::string message;
    std::getline(in, message);
    throw ValueError(fmt::format("rendezvous: {}", message));
  }
  int nproc = 0;
  in >> nproc;
  int local = 0, node = 0;
  for (int r = 0; r <= info.rank; ++r) in >> local >> node;
  if (!in || nproc < 1) throw BackendError(fmt::format("rendezvous: malformed topology in {}", store.describe()));
  info.local_rank = local;
  info.local_rank_known = true;
  set_nproc_per_node(info, nproc);
  info.node_rank = node;
}

}  // namespace idist::rendezvous
