// Stores across real processes: forked workers are clients (forked before the parent starts any thread),
// the parent is rank 0. Also the rendezvous path of the backends: discover -> open_store ->
// exchange_topology -> a store barrier, with each init method.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "store/store_barrier.hpp"
#include "store/tcp_store.hpp"
#include "store_test_util.hpp"
#include "support/time_scale.hpp"

namespace {
using namespace std::chrono_literals;
using idist::store::TCPStore;
using idist::test::fork_worker;
using idist::test::free_port;
using idist::test::seconds_since;
using idist::test::wait_worker;
using Clock = std::chrono::steady_clock;
namespace rdv = idist::rendezvous;

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }

// One rank of a torchrun-style world on this host, rendezvousing through `init_method`.
bool run_rank(int rank, int world, int port, const std::string& init_method) {
  idist::InitOptions opts;
  opts.timeout = 20s;
  opts.init_method = init_method;
  const rdv::Environ env = {{"RANK", std::to_string(rank)},
                            {"LOCAL_RANK", std::to_string(rank)},
                            {"WORLD_SIZE", std::to_string(world)},
                            {"MASTER_ADDR", "127.0.0.1"},
                            {"MASTER_PORT", std::to_string(port)}};
  auto info = rdv::discover(opts, env);
  auto store = rdv::open_store(opts, info);
  rdv::exchange_topology(*store, info, opts.timeout);
  if (info.nproc_per_node != world || info.nnodes != 1 || info.node_rank != 0 || info.local_rank != rank) {
    std::fprintf(stderr, "rank %d: nproc %d nnodes %d node %d local %d\n", rank, info.nproc_per_node, info.nnodes,
                 info.node_rank, info.local_rank);
    return false;
  }
  store->set_string(fmt::format("hello/{}", rank), fmt::format("from {}", rank));
  for (int r = 0; r < world; ++r)
    if (store->get_string(fmt::format("hello/{}", r)) != fmt::format("from {}", r)) return false;
  idist::store::store_barrier(*store, "end", world, opts.timeout);
  return true;
}

void run_world(const std::string& init_method, int port) {
  constexpr int kWorld = 4;
  std::vector<pid_t> pids;
  for (int r = 1; r < kWorld; ++r)
    pids.push_back(fork_worker([&, r] { return run_rank(r, kWorld, port, init_method); }));
  EXPECT_TRUE(run_rank(0, kWorld, port, init_method));
  for (pid_t pid : pids) EXPECT_EQ(wait_worker(pid, 30s), 0);
}
}  // namespace

TEST(TCPStoreProcesses, ConcurrentClientProcessesBeforeAndAfterTheServerStarts) {
  constexpr int kWorkers = 4;
  constexpr int kAdds = 100;
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w)
    pids.push_back(fork_worker([&, w] {
      TCPStore client("127.0.0.1", port, false, kWorkers + 1, 20s);  // the server starts later
      for (int i = 0; i < kAdds; ++i) client.add("counter", 1);
      client.set(fmt::format("key{}", w), bytes(fmt::format("value{}", w)));
      for (int k = 0; k < kWorkers; ++k)
        if (client.get_string(fmt::format("key{}", k)) != fmt::format("value{}", k)) return false;
      client.add("finished", 1);
      return true;
    }));
  std::this_thread::sleep_for(300ms);
  TCPStore server("127.0.0.1", port, true, kWorkers + 1, 20s);  // waits until all 5 joined
  EXPECT_EQ(server.num_joined(), kWorkers + 1);
  for (pid_t pid : pids) EXPECT_EQ(wait_worker(pid, 30s), 0);
  EXPECT_EQ(server.add("counter", 0), kWorkers * kAdds);
  EXPECT_EQ(server.add("finished", 0), kWorkers);
}

TEST(TCPStoreProcesses, ClientsSeeTheServerProcessDieInsteadOfHanging) {
  const int port = free_port();
  const pid_t server_pid = fork_worker([&] {
    TCPStore server("127.0.0.1", port, true, 2, 10s);
    std::this_thread::sleep_for(300ms);
    ::_exit(0);  // dies without a clean shutdown, with the client waiting
    return true;
  });
  TCPStore client("127.0.0.1", port, false, 2, 10s);
  const auto start = Clock::now();
  try {
    client.wait({"never"}, 30s);
    FAIL() << "expected an error";
  } catch (const idist::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("connection lost"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(start), idist::test::scaled(3.0));
  EXPECT_EQ(wait_worker(server_pid, 10s), 0);
}

TEST(TCPStoreProcesses, KilledClientDoesNotDelayTheServersShutdown) {
  const int port = free_port();
  const pid_t pid = fork_worker([&] {
    TCPStore client("127.0.0.1", port, false, 2, 10s);
    client.wait({"never"}, 60s);  // pending on the server when it is killed
    return true;
  });
  auto server = std::make_unique<TCPStore>("127.0.0.1", port, true, 2, 20s);  // both joined
  std::this_thread::sleep_for(200ms);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_worker(pid, 5s), 128 + SIGKILL);
  const auto start = Clock::now();
  server.reset();  // no client left: returns without waiting for the 20 s timeout
  EXPECT_LT(seconds_since(start), idist::test::scaled(2.0));
}

TEST(Rendezvous, EnvInitMethodAcrossProcesses) { run_world("env://", free_port()); }

TEST(Rendezvous, TcpInitMethodAcrossProcesses) {
  const int port = free_port();
  run_world(fmt::format("tcp://127.0.0.1:{}", port), 1 /* MASTER_PORT is ignored */);
}

TEST(Rendezvous, FileInitMethodAcrossProcesses) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("idist_rdv_{}", ::getpid());
  run_world("file://" + dir.string(), 1);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(Rendezvous, MissingWorkersAreReportedAsKOfN) {
  // World of 3 with only ranks 0 and 1 started: rank 0's store says how many joined.
  const int port = free_port();
  const pid_t pid = fork_worker([&] {
    try {
      run_rank(1, 3, port, "env://");
    } catch (const idist::Error&) {  // rank 0 gives up and goes away: expected
    }
    return true;
  });
  const auto start = Clock::now();
  try {
    idist::InitOptions opts;
    opts.timeout = 1s;
    const rdv::Environ env = {
        {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", std::to_string(port)}};
    rdv::open_store(opts, rdv::discover(opts, env));
    FAIL() << "expected TimeoutError";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 3 workers joined"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(start), idist::test::scaled(3.0));
  EXPECT_EQ(wait_worker(pid, 30s), 0);
}
