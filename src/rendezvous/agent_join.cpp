#include "rendezvous/agent_join.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/context.hpp"
#include "idist/error.hpp"

namespace idist::rendezvous {

namespace {
constexpr const char* kCount = "join/count";
constexpr const char* kVerdict = "join/verdict";
constexpr const char* kOk = "ok";
constexpr int kMissingListed = 16;

std::string rank_key(int r) { return fmt::format("join/rank_{}", r); }

std::vector<int> missing_ranks(store::Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size && int(missing.size()) < kMissingListed; ++r)
    if (!store.check({rank_key(r)})) missing.push_back(r);
  return missing;
}
}  // namespace

void join_agent_store(store::Store& store, int rank, int world_size, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  if (store.add(rank_key(rank), 1) > 1) {
    const auto message = fmt::format(
        "rendezvous on {}: rank {} was claimed by two processes (this one: host {}, pid {}); every worker needs its "
        "own RANK (are two jobs using the same torchrun agent?)",
        store.describe(), rank, idist::hostname(), ::getpid());
    store.set_string(kVerdict, message);
    throw ValueError(message);
  }
  if (store.add(kCount, 1) == world_size) {
    std::vector<std::string> keys;
    for (int r = 0; r < world_size; ++r) keys.push_back(rank_key(r));
    if (store.check(keys)) {
      store.set_string(kVerdict, kOk);
    } else {
      store.set_string(kVerdict,
                       fmt::format("rendezvous on {}: {} processes joined but ranks [{}] did not: a rank was "
                                   "claimed twice",
                                   store.describe(), world_size, fmt::join(missing_ranks(store, world_size), ", ")));
    }
  }
  try {
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    store.wait({kVerdict}, std::max(std::chrono::milliseconds(0), timeout - spent));
  } catch (const TimeoutError&) {
    const auto joined = store.add(kCount, 0);
    throw TimeoutError(fmt::format(
        "rendezvous on {}: {} of {} workers joined within {:.2f} s; ranks [{}] never did (are they all started, "
        "with WORLD_SIZE = {}?)",
        store.describe(), joined, world_size, std::chrono::duration<double>(timeout).count(),
        fmt::join(missing_ranks(store, world_size), ", "), world_size));
  }
  const auto verdict = store.get_string(kVerdict);
  if (verdict != kOk) throw ValueError(verdict);
}

}  // namespace idist::rendezvous
