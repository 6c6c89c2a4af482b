#include "store/store_monitored_barrier.hpp"

#include <fmt/format.h>

#include "backend_kit/monitored_barrier_text.hpp"
#include "idist/error.hpp"

namespace idist::store {

void store_monitored_barrier(Store& store, const std::string& name, const std::vector<int>& members, int rank,
                             std::chrono::milliseconds timeout, bool wait_all_ranks) {
  const int leader = members.front();
  const std::string verdict_key = name + "/verdict";
  const auto arrived_key = [&](int r) { return fmt::format("{}/arrived/{}", name, r); };
  if (rank != leader) {
    store.set_string(arrived_key(rank), "1");
    try {
      store.wait({verdict_key}, 2 * timeout);
    } catch (const TimeoutError&) {
      throw TimeoutError(backend_kit::leader_silent(rank, leader, 2 * timeout));
    }
    const std::string verdict = store.get_string(verdict_key);
    if (verdict != "ok") throw TimeoutError(backend_kit::monitored_barrier_failure(rank, verdict));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (std::size_t i = 1; i < members.size(); ++i) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    bool arrived = false;
    if (left.count() > 0) {
      try {
        store.wait({arrived_key(members[i])}, left);
        arrived = true;
      } catch (const TimeoutError&) {
      }
    } else {
      arrived = store.check({arrived_key(members[i])});
    }
    if (!arrived) {
      missing.push_back(members[i]);
      if (!wait_all_ranks) break;
    }
  }
  const std::string verdict = missing.empty() ? "ok" : backend_kit::missing_ranks_verdict(missing, timeout);
  store.set_string(verdict_key, verdict);
  if (!missing.empty()) throw TimeoutError(backend_kit::monitored_barrier_failure(rank, verdict));
}

}  // namespace idist::store
