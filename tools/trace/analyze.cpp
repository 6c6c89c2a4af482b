#include "analyze.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace idist_trace {

namespace {

std::string join(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// "ranks 0, 1: <call> [state]; rank 2: <call> [state]", ranks grouped by identical calls.
std::string describe(const std::map<int, const Entry*>& by_rank) {
  std::map<std::string, std::vector<int>> groups;
  std::vector<std::string> order;
  for (const auto& [rank, e] : by_rank) {
    const std::string key = e->call + " [" + e->state + "]";
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(rank);
  }
  std::string s;
  for (const auto& key : order) s += (s.empty() ? "" : "; ") + join(groups[key]) + ": " + key;
  return s;
}

// The call without its trailing " seq N", so that states and sequence numbers do not hide a match.
std::string call_of(const Entry& e) {
  const auto at = e.call.rfind(" seq ");
  return at == std::string::npos ? e.call : e.call.substr(0, at);
}

}  // namespace

std::vector<std::string> findings(const std::vector<RankTrace>& traces) {
  std::vector<std::string> out;
  const int world = traces.front().world_size;
  std::vector<int> silent;
  std::set<int> present;
  for (const auto& t : traces) present.insert(t.rank);
  for (int r = 0; r < world; ++r)
    if (!present.count(r)) silent.push_back(r);
  if (!silent.empty())
    out.push_back(join(silent) + " of the world of " + std::to_string(world) +
                  " left no dump: they neither failed nor timed out in idist (stuck outside a collective, or "
                  "exited)");

  // group -> rank -> seq -> entry
  std::map<std::string, std::map<int, std::map<std::int64_t, const Entry*>>> by_group;
  for (const auto& t : traces)
    for (const auto& e : t.entries) by_group[e.group][t.rank][e.seq] = &e;
  for (const auto& [group, ranks] : by_group) {
    // Sequence numbers below a rank's oldest entry were overwritten in its ring: start above them all.
    std::int64_t first = 0, last = 0;
    for (const auto& [rank, seqs] : ranks) {
      first = std::max(first, seqs.begin()->first);
      last = std::max(last, seqs.rbegin()->first);
    }
    for (std::int64_t seq = first; seq <= last; ++seq) {
      std::map<int, const Entry*> at;
      std::vector<int> behind;
      std::map<int, std::int64_t> last_seq;
      for (const auto& [rank, seqs] : ranks) {
        const auto it = seqs.find(seq);
        if (it != seqs.end())
          at[rank] = it->second;
        else if (seqs.rbegin()->first < seq)
          behind.push_back(rank), last_seq[rank] = seqs.rbegin()->first;
      }
      bool differ = false;
      for (const auto& [rank, e] : at) differ = differ || call_of(*e) != call_of(*at.begin()->second);
      if (differ) {
        out.push_back("group " + group + ": the ranks diverge at seq " + std::to_string(seq) + ": " + describe(at));
        break;
      }
      if (!behind.empty() && !at.empty()) {
        std::string lasts;
        for (int r : behind) lasts += (lasts.empty() ? "" : ", ") + std::to_string(last_seq[r]);
        out.push_back("group " + group + ": " + join(behind) + " never reached seq " + std::to_string(seq) +
                      " (last recorded: " + lasts + "); " + describe(at));
        break;
      }
    }
  }
  return out;
}

}  // namespace idist_trace
