// Rendezvous on torchrun's agent store, with real processes against torch's c10d TCPStore server in a
// Python child: the join (count, a rank claimed twice, a missing rank), and open_store() under torchrun's
// variables (the attempt prefix, one prefix per initialization, what torch's clients see).
#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "python_store.hpp"
#include "rendezvous/discovery.hpp"
#include "store/c10d/c10d_store.hpp"
#include "store/prefix_store.hpp"
#include "store/store_join.hpp"
#include "store_test_util.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::test::fork_worker;
using idist::test::PythonStore;
using idist::test::to_hex;
using idist::test::wait_worker;
namespace rdv = idist::rendezvous;

constexpr const char* kPrefix = "/worker/attempt_0/idist/init_0";

std::shared_ptr<idist::store::Store> agent(int port, std::chrono::milliseconds timeout = 20s) {
  auto c10d = std::make_shared<idist::store::C10dStore>("127.0.0.1", port, timeout,
                                                        idist::store::C10dStoreOptions{"torchrun agent store", {}});
  return std::make_shared<idist::store::PrefixStore>(kPrefix, c10d);
}

// Exit codes of a joining worker.
constexpr int kJoined = 0;
constexpr int kOther = 1;
constexpr int kClaimedTwice = 2;
constexpr int kTimedOut = 3;

pid_t join_worker(int port, int rank, int world, std::chrono::milliseconds timeout, const std::string& expect = "") {
  return fork_worker([=] {
    auto store = agent(port);
    try {
      idist::store::join_world(*store, rank, world, timeout);
      std::_Exit(kJoined);
    } catch (const idist::ValueError& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      std::_Exit(std::string(e.what()).find("was claimed by two processes") != std::string::npos ? kClaimedTwice
                                                                                                 : kOther);
    } catch (const idist::TimeoutError& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      std::_Exit(std::string(e.what()).find(expect) != std::string::npos ? kTimedOut : kOther);
    }
    return false;
  });
}

TEST(AgentJoin, EveryRankJoins) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) pids.push_back(join_worker(server.port(), r, 3, 20s));
  for (auto pid : pids) EXPECT_EQ(wait_worker(pid, 60s), kJoined);
  EXPECT_EQ(server.command(fmt::format("pget {} idist/join/verdict", kPrefix)), "VALUE " + to_hex("ok"));
  EXPECT_EQ(server.command(fmt::format("pget {} idist/join/count", kPrefix)), "VALUE " + to_hex("3"));
}

TEST(AgentJoin, ARankClaimedTwiceFailsFast) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  std::vector<pid_t> pids;
  for (int r : {0, 1, 1}) pids.push_back(join_worker(server.port(), r, 2, 20s));
  int twice = 0;
  for (auto pid : pids) {
    const int code = wait_worker(pid, 60s);
    EXPECT_TRUE(code == kJoined || code == kClaimedTwice) << "exit code " << code;
    twice += code == kClaimedTwice;
  }
  EXPECT_GE(twice, 1);
}

TEST(AgentJoin, AMissingRankIsNamedAfterTheTimeout) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int r : {0, 1})
    pids.push_back(
        join_worker(server.port(), r, 3, 1500ms, "2 of 3 workers joined within 1.50 s; ranks [2] never did"));
  for (auto pid : pids) EXPECT_EQ(wait_worker(pid, 60s), kTimedOut);
  EXPECT_LT(idist::test::seconds_since(start), idist::test::scaled(20.0));
}

// discover() + open_store() under torchrun's variables: the attempt's prefix, a fresh prefix for each
// initialization of a process, and the store torch's workers would see.
rdv::Environ torchrun_env(int rank, int world, int port, int restart) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"GROUP_RANK", "0"},
          {"GROUP_WORLD_SIZE", "1"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"TORCHELASTIC_RUN_ID", "agent-store-test"},
          {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart)},
          {"TORCHELASTIC_MAX_RESTARTS", "3"}};
}

TEST(AgentStoreRendezvous, OpenStoreUsesTheAgentsStoreUnderTheAttemptPrefix) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  constexpr int kWorld = 2;
  const int port = server.port();
  std::vector<pid_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    pids.push_back(fork_worker([=] {
      idist::InitOptions opts;
      opts.timeout = 20s;
      for (int init = 0; init < 2; ++init) {  // initialize, finalize, initialize again in one attempt
        auto info = rdv::discover(opts, torchrun_env(r, kWorld, port, 2));
        if (!info.agent_store) return false;
        auto store = rdv::open_store(opts, info);
        const auto expected = fmt::format("prefix '/worker/attempt_2/idist/init_{}/' of torchrun agent store", init);
        if (store->describe().find(expected) != 0) {
          std::fprintf(stderr, "describe(): %s\n", store->describe().c_str());
          return false;
        }
        store->set_string(fmt::format("hello/{}", r), fmt::format("init {} rank {}", init, r));
        for (int o = 0; o < kWorld; ++o)
          if (store->get_string(fmt::format("hello/{}", o)) != fmt::format("init {} rank {}", init, o)) return false;
      }
      return true;
    }));
  }
  for (auto pid : pids) EXPECT_EQ(wait_worker(pid, 60s), 0);
  for (int init = 0; init < 2; ++init) {
    EXPECT_EQ(server.command(fmt::format("pget /worker/attempt_2/idist/init_{} idist/join/verdict", init)),
              "VALUE " + to_hex("ok"));
    EXPECT_EQ(server.command(fmt::format("pget /worker/attempt_2/idist/init_{} hello/1", init)),
              "VALUE " + to_hex(fmt::format("init {} rank 1", init)));
  }
  EXPECT_EQ(server.command("check /worker/attempt_0/idist/init_0/idist/join/verdict"), "FALSE");
}

// A restarted world (attempt 1) finds none of attempt 0's keys, even where attempt 0 left a complete
// join behind.
TEST(AgentStoreRendezvous, ARestartedWorldStartsFromFreshKeys) {
  IDIST_REQUIRE_TORCH();
  PythonStore server;
  // Attempt 0 completed its join; then one worker died.
  EXPECT_EQ(server.command(fmt::format("pset /worker/attempt_0/idist/init_0 idist/join/verdict {}", to_hex("ok"))),
            "OK");
  EXPECT_EQ(server.command(fmt::format("pset /worker/attempt_0/idist/init_0 idist/join/count {}", to_hex("2"))), "OK");
  const int port = server.port();
  // Attempt 1: rank 0 alone must not pass the join (attempt 0's verdict is not its own).
  const pid_t alone = fork_worker([=] {
    idist::InitOptions opts;
    opts.timeout = 1500ms;
    auto info = rdv::discover(opts, torchrun_env(0, 2, port, 1));
    try {
      rdv::open_store(opts, info);
    } catch (const idist::TimeoutError& e) {
      return std::string(e.what()).find("1 of 2 workers joined") != std::string::npos;
    }
    return false;
  });
  EXPECT_EQ(wait_worker(alone, 60s), 0);
}

}  // namespace
