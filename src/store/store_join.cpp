#include "store/store_join.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/context.hpp"
#include "idist/error.hpp"

namespace idist::store {

namespace {
constexpr const char* kAnonymous = "idist/join/anonymous";
constexpr const char* kVerdict = "idist/join/verdict";
constexpr const char* kOk = "ok";
constexpr int kMissingListed = 16;
using Clock = std::chrono::steady_clock;

std::string rank_key(int r) { return fmt::format("{}rank_{}", kJoinPrefix, r); }

// One CHECK per rank until kMissingListed are found: only on the way to an error.
std::vector<int> missing_ranks(Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size && int(missing.size()) < kMissingListed; ++r)
    if (!store.check({rank_key(r)})) missing.push_back(r);
  return missing;
}

// Run by the process that completed the count. With anonymous processes the ranks cannot be checked.
void publish_verdict(Store& store, int world_size) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(rank_key(r));
  if (store.add(kAnonymous, 0) > 0 || store.check(keys)) return store.set_string(kVerdict, kOk);
  store.set_string(kVerdict, fmt::format("rendezvous on {}: {} processes joined but ranks [{}] did not: a rank was "
                                         "claimed twice, or is outside 0..{}",
                                         store.describe(), world_size,
                                         fmt::join(missing_ranks(store, world_size), ", "), world_size - 1));
}
}  // namespace

void announce_join(Store& store, int rank, int world_size) {
  if (rank >= 0 && store.add(rank_key(rank), 1) > 1) {
    const auto message = fmt::format(
        "rendezvous on {}: rank {} was claimed by two processes (this one: host {}, pid {}); every worker needs its "
        "own RANK (is RANK set twice to the same value, or do two jobs share MASTER_ADDR:MASTER_PORT or a torchrun "
        "agent?)",
        store.describe(), rank, idist::hostname(), ::getpid());
    store.set_string(kVerdict, message);
    throw ValueError(message);
  }
  if (rank < 0 && world_size > 0) store.add(kAnonymous, 1);
  if (store.add(kJoinCountKey, 1) == world_size) publish_verdict(store, world_size);
}

void await_join(Store& store, int world_size, std::chrono::milliseconds timeout) {
  if (world_size <= 0)
    throw ValueError(fmt::format("rendezvous on {}: waiting for the workers needs world_size > 0, got {}",
                                 store.describe(), world_size));
  try {
    store.wait({kVerdict}, timeout);
  } catch (const TimeoutError&) {
    const auto joined = store.add(kJoinCountKey, 0);
    const auto missing = store.add(kAnonymous, 0) > 0
                             ? std::string("the others never did")
                             : fmt::format("ranks [{}] never did", fmt::join(missing_ranks(store, world_size), ", "));
    throw TimeoutError(fmt::format(
        "rendezvous on {}: {} of {} workers joined within {:.2f} s; {} (are they all started, with the same "
        "MASTER_ADDR / MASTER_PORT or init_method, and WORLD_SIZE = {}?)",
        store.describe(), joined, world_size, std::chrono::duration<double>(timeout).count(), missing, world_size));
  }
  const auto verdict = store.get_string(kVerdict);
  if (verdict != kOk) throw ValueError(verdict);
}

void join_world(Store& store, int rank, int world_size, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  announce_join(store, rank, world_size);
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  await_join(store, world_size, std::max(std::chrono::milliseconds(0), timeout - spent));
}

}  // namespace idist::store
