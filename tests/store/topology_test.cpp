// nproc_per_node / nnodes / node rank: ignite's rules (compute_topology) and the exchange through a store.
#include <unistd.h>

#include <atomic>
#include <climits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/store_gather.hpp"
#include "rendezvous/topology.hpp"
#include "store/tcp_store.hpp"

namespace {
using namespace std::chrono_literals;
using idist::rendezvous::WorldInfo;
using idist::rendezvous::detail::compute_topology;
using idist::rendezvous::detail::TopologyEntry;
using idist::store::TCPStore;

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Runs exchange_topology on `infos.size()` threads, each with its own TCPStore client; returns the results
// or rethrows the first error (per rank in `errors`).
std::vector<WorldInfo> exchange(std::vector<WorldInfo> infos, std::vector<std::string>* errors = nullptr,
                                std::chrono::milliseconds timeout = 5s) {
  const int n = static_cast<int>(infos.size());
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, true, n, 10s, false);
  std::vector<std::string> errs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        TCPStore client("127.0.0.1", server->port(), false, n, 10s);
        idist::rendezvous::exchange_topology(client, infos[r], timeout);
      } catch (const std::exception& e) {
        errs[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (errors) *errors = errs;
  return infos;
}

WorldInfo rank_info(int rank, int world, int local_rank /* -1: unknown */) {
  WorldInfo info;
  info.rank = rank;
  info.world_size = world;
  info.local_rank = local_rank < 0 ? 0 : local_rank;
  info.local_rank_known = local_rank >= 0;
  info.topology_exact = false;
  info.nproc_per_node = world;
  return info;
}
}  // namespace

TEST(ComputeTopology, MaxLocalRankPlusOne) {
  const auto t = compute_topology({{0, "a"}, {1, "a"}, {0, "b"}, {1, "b"}}, 0);
  EXPECT_TRUE(t.error.empty());
  EXPECT_EQ(t.nproc_per_node, 2);
  EXPECT_EQ(t.local_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(t.node_rank, (std::vector<int>{0, 0, 1, 1}));  // rank / nproc
}

TEST(ComputeTopology, EnvironmentNprocWins) {
  const auto t = compute_topology({{0, "a"}, {1, "a"}, {0, "b"}, {1, "b"}}, 4);
  EXPECT_EQ(t.nproc_per_node, 4);
  EXPECT_EQ(t.node_rank, (std::vector<int>{0, 0, 0, 0}));
}

TEST(ComputeTopology, HostnameHeuristicForUnknownLocalRanks) {
  // ignite's _compute_node_and_local_ranks: hosts in order of first appearance, contiguous ranks per host.
  const auto t = compute_topology({{-1, "n1"}, {-1, "n1"}, {-1, "n1"}, {-1, "n2"}, {-1, "n2"}, {-1, "n2"}}, 0);
  EXPECT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.local_rank, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(t.node_rank, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(t.nproc_per_node, 3);
  // Uneven hosts: node ranks follow the hosts, nproc is the largest.
  const auto u = compute_topology({{-1, "x"}, {-1, "y"}, {-1, "y"}}, 0);
  EXPECT_EQ(u.local_rank, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(u.node_rank, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(u.nproc_per_node, 2);
}

TEST(ComputeTopology, GuessedLocalRankCollisionsAreErrors) {
  // Interleaved hosts break the heuristic's contiguity assumption: detected, not silently wrong.
  const auto t = compute_topology({{-1, "a"}, {-1, "b"}, {-1, "a"}, {-1, "b"}}, 0);
  EXPECT_NE(t.error.find("ranks 0 and 2 on host 'a' both have local rank 0"), std::string::npos) << t.error;
  // A guess colliding with a given local rank.
  const auto u = compute_topology({{1, "a"}, {-1, "a"}}, 0);
  EXPECT_NE(u.error.find("both have local rank 1"), std::string::npos) << u.error;
}

TEST(ComputeTopology, GivenLocalRanksMayRepeatOnOneHost) {
  // ignite's 2-node emulation: two "nodes" of 2 processes on one host.
  const auto t = compute_topology({{0, "h"}, {1, "h"}, {0, "h"}, {1, "h"}}, 0);
  EXPECT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.nproc_per_node, 2);
  EXPECT_EQ(t.node_rank, (std::vector<int>{0, 0, 1, 1}));
}

TEST(ComputeTopology, EncodeDecodeRoundTrip) {
  using namespace idist::rendezvous::detail;
  const auto t = compute_topology({{0, "a"}, {1, "a"}, {0, "b"}}, 0);
  const auto back = decode_topology(encode_topology(t), 3);
  EXPECT_EQ(back.nproc_per_node, t.nproc_per_node);
  EXPECT_EQ(back.local_rank, t.local_rank);
  EXPECT_EQ(back.node_rank, t.node_rank);
  const auto err = decode_topology(encode_topology(compute_topology({{-1, "a"}, {-1, "b"}, {-1, "a"}}, 0)), 3);
  EXPECT_NE(err.error.find("both have local rank 0"), std::string::npos);
  EXPECT_THROW(decode_topology("garbage", 2), idist::BackendError);
}

TEST(ExchangeTopology, KnownLocalRanks) {
  std::vector<WorldInfo> infos;
  for (int r = 0; r < 4; ++r) infos.push_back(rank_info(r, 4, r % 2));
  std::vector<std::string> errors;
  const auto out = exchange(infos, &errors);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[r], "") << r;
    EXPECT_EQ(out[r].nproc_per_node, 2);
    EXPECT_EQ(out[r].nnodes, 2);
    EXPECT_EQ(out[r].node_rank, r / 2);
    EXPECT_EQ(out[r].local_rank, r % 2);
    EXPECT_TRUE(out[r].topology_exact);
  }
}

TEST(ExchangeTopology, UnknownLocalRanksOnOneHost) {
  std::vector<WorldInfo> infos;
  for (int r = 0; r < 3; ++r) infos.push_back(rank_info(r, 3, -1));
  std::vector<std::string> errors;
  const auto out = exchange(infos, &errors);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "") << r;
    EXPECT_TRUE(out[r].local_rank_known);
    EXPECT_EQ(out[r].local_rank, r);  // all on this host
    EXPECT_EQ(out[r].nproc_per_node, 3);
    EXPECT_EQ(out[r].nnodes, 1);
    EXPECT_EQ(out[r].node_rank, 0);
  }
}

TEST(ExchangeTopology, InconsistentLocalRanksFailOnEveryRank) {
  // Rank 0 says local rank 1; rank 1 has none and is guessed 1 on the same host.
  std::vector<WorldInfo> infos = {rank_info(0, 2, 1), rank_info(1, 2, -1)};
  std::vector<std::string> errors;
  exchange(infos, &errors);
  for (const auto& e : errors) EXPECT_NE(e.find("both have local rank 1"), std::string::npos) << e;
  EXPECT_NE(errors[0].find(hostname()), std::string::npos) << errors[0];
}

TEST(ExchangeTopology, MissingRanksAreNamedOnTimeout) {
  // World of 3, only ranks 0 and 1 take part.
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, true, 3, 10s, false);
  std::string rank1_error;
  std::thread rank1([&] {
    TCPStore client("127.0.0.1", server->port(), false, 3, 10s);
    auto info = rank_info(1, 3, 1);
    try {
      idist::rendezvous::exchange_topology(client, info, 500ms);
    } catch (const idist::TimeoutError& e) {
      rank1_error = e.what();
    }
  });
  auto info = rank_info(0, 3, 0);
  try {
    idist::rendezvous::exchange_topology(*server, info, 400ms);
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks [2] of 3 did not publish"), std::string::npos) << e.what();
  }
  rank1.join();
  EXPECT_FALSE(rank1_error.empty());
}

TEST(ExchangeTopology, NoOpWhenExactAndSingleProcessShortcut) {
  WorldInfo exact;  // defaults: a single process, exact
  TCPStore unused("127.0.0.1", 0, true, 1, 1s, false);
  idist::rendezvous::exchange_topology(unused, exact, 1s);
  EXPECT_FALSE(unused.check({"idist/topology/0"}));
  auto single = rank_info(0, 1, -1);
  idist::rendezvous::exchange_topology(unused, single, 1s);
  EXPECT_TRUE(single.topology_exact);
  EXPECT_EQ(single.nproc_per_node, 1);
}

// A client whose reads of the gathered result arrive late, as from a rank slower than rank 0.
class LateResultReader : public idist::store::Store {
 public:
  explicit LateResultReader(int port) : inner_("127.0.0.1", port, false, 2, 10s) {}
  std::chrono::steady_clock::time_point read_at{};

  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  std::string describe() const override { return inner_.describe(); }

 private:
  void do_set(const std::string& key, const std::vector<char>& data) override { inner_.set(key, data); }
  std::vector<char> do_get(const std::string& key) override {
    const bool result = key.ends_with("result");
    if (result) std::this_thread::sleep_for(300ms);
    auto value = inner_.get(key);
    if (result) read_at = std::chrono::steady_clock::now();
    return value;
  }
  std::int64_t do_add(const std::string& key, std::int64_t delta) override { return inner_.add(key, delta); }
  bool do_check(const std::vector<std::string>& keys) override { return inner_.check(keys); }
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) override { inner_.wait(keys, t); }
  TCPStore inner_;
};

// Rank 0's process often hosts the store and may exit as soon as the exchange returns (a result every
// rank raises on): it must not return before a slower rank has read the result.
TEST(GatherAndPublish, RankZeroReturnsOnlyAfterEveryRankReadTheResult) {
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, true, 2, 10s, false);
  const auto join = [](const std::vector<std::string>& values) { return values[0] + "," + values[1]; };
  std::chrono::steady_clock::time_point returned_at{};
  std::string result0, result1;
  LateResultReader late(server->port());
  std::thread rank1([&] { result1 = idist::rendezvous::gather_and_publish(late, "t/", 1, 2, "b", "b", 5s, join); });
  TCPStore client("127.0.0.1", server->port(), false, 2, 10s);
  result0 = idist::rendezvous::gather_and_publish(client, "t/", 0, 2, "a", "a", 5s, join);
  returned_at = std::chrono::steady_clock::now();
  rank1.join();
  EXPECT_EQ(result0, "a,b");
  EXPECT_EQ(result1, "a,b");
  EXPECT_GE(returned_at, late.read_at) << "rank 0 returned "
                                       << std::chrono::duration<double>(late.read_at - returned_at).count()
                                       << " s before rank 1 had read the result";
}
