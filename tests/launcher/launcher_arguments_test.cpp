// Argument checks of spawn() and Parallel: one test per message (ignite.distributed.launcher's).
// Runs in one serial process; no worker is started by these tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "idist/idist.hpp"
#include "launcher/process_helpers.hpp"

namespace {

// Expects fn to throw idist::ValueError whose message contains `needle`.
template <class Fn>
void expect_value_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected a ValueError containing: " << needle;
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ValueError: " << e.what();
  }
}

void noop(int) {}

TEST(SpawnArguments, UnknownBackend) {
  expect_value_error([] { idist::spawn("tpu", noop); }, "Backend should be one of ['");
  expect_value_error([] { idist::spawn("tpu", noop); }, "but given 'tpu'");
}

TEST(SpawnArguments, MpiCannotBeSpawned) {
  expect_value_error([] { idist::spawn("mpi", noop, {.nproc_per_node = 2}); }, "mpi backend cannot be spawned");
  expect_value_error([] { idist::spawn("mpi", noop, {.nproc_per_node = 2}); }, "mpirun");
}

TEST(SpawnArguments, NprocPerNodeMustBePositive) {
  expect_value_error([] { idist::spawn("gloo", noop, {.nproc_per_node = 0}); },
                     "Argument nproc_per_node should positive, but given 0");
}

TEST(SpawnArguments, NnodesMustBePositive) {
  expect_value_error([] { idist::spawn("gloo", noop, {.nproc_per_node = 1, .nnodes = -1}); },
                     "Argument nnodes should positive, but given -1");
}

TEST(SpawnArguments, NodeRankInRange) {
  expect_value_error([] { idist::spawn("gloo", noop, {.nnodes = 2, .node_rank = 2, .master_addr = "127.0.0.1"}); },
                     "Argument node_rank should be between 0 and 1, but given 2");
  expect_value_error([] { idist::spawn("gloo", noop, {.node_rank = -1}); },
                     "Argument node_rank should be between 0 and 0, but given -1");
}

TEST(SpawnArguments, MasterPortInRange) {
  expect_value_error([] { idist::spawn("gloo", noop, {.master_port = 70000}); },
                     "Argument master_port should be between 1 and 65535, but given 70000");
}

TEST(SpawnArguments, TimeoutPositive) {
  expect_value_error([] { idist::spawn("gloo", noop, {.timeout = std::chrono::milliseconds(0)}); },
                     "Argument timeout should be positive");
}

TEST(SpawnArguments, NotFromAnInitializedProcess) {
  // A world of one gloo process (no launcher variables): spawning from it must be refused.
  idist::InitOptions opts;
  opts.timeout = std::chrono::seconds(20);
  opts.init_method = "tcp://127.0.0.1:" + std::to_string(idist::test::free_tcp_port());
  opts.rank = 0;
  opts.world_size = 1;
  idist::initialize("gloo", opts);
  expect_value_error([] { idist::spawn("gloo", noop, {.nproc_per_node = 2}); },
                     "gloo backend is already initialized in this process");
  idist::finalize();
  EXPECT_FALSE(idist::backend().has_value());
}

TEST(ParallelArguments, UnknownBackend) {
  expect_value_error([] { idist::Parallel p("tpu"); }, "Unknown backend 'tpu'. Available backends: ['");
}

TEST(ParallelArguments, SerialRejectsEveryOption) {
  const std::string pre = "If backend is None, argument '";
  expect_value_error([] { idist::Parallel p(std::nullopt, {.nproc_per_node = 2}); },
                     pre + "nproc_per_node' should be also None, but given 2");
  expect_value_error([] { idist::Parallel p(std::nullopt, {.nnodes = 1}); },
                     pre + "nnodes' should be also None, but given 1");
  expect_value_error([] { idist::Parallel p(std::nullopt, {.node_rank = 0}); },
                     pre + "node_rank' should be also None, but given 0");
  expect_value_error([] { idist::Parallel p(std::nullopt, {.master_addr = "host"}); },
                     pre + "master_addr' should be also None, but given host");
  expect_value_error([] { idist::Parallel p(std::nullopt, {.master_port = 1234}); },
                     pre + "master_port' should be also None, but given 1234");
  expect_value_error([] { idist::Parallel p(std::nullopt, {.init_method = "env://"}); },
                     pre + "init_method' should be also None, but given env://");
}

TEST(ParallelArguments, NprocPerNodeMustBePositive) {
  expect_value_error([] { idist::Parallel p("gloo", {.nproc_per_node = 0}); },
                     "Argument nproc_per_node should positive, but given 0");
}

TEST(ParallelArguments, NnodesMustBePositive) {
  expect_value_error([] { idist::Parallel p("gloo", {.nproc_per_node = 1, .nnodes = 0}); },
                     "Argument nnodes should positive, but given 0");
}

TEST(ParallelArguments, MultiNodeNeedsNodeRank) {
  expect_value_error([] { idist::Parallel p("gloo", {.nproc_per_node = 1, .nnodes = 2}); },
                     "If number of nodes larger than one, arguments node_rank should be given");
}

TEST(ParallelArguments, NodeRankInRange) {
  expect_value_error(
      [] {
        idist::Parallel p("gloo",
                          {.nproc_per_node = 1, .nnodes = 2, .node_rank = 5, .master_addr = "a", .master_port = 1});
      },
      "Argument node_rank should be between 0 and 1, but given 5");
}

TEST(ParallelArguments, MultiNodeNeedsMasterAddressAndPort) {
  expect_value_error(
      [] { idist::Parallel p("gloo", {.nproc_per_node = 1, .nnodes = 2, .node_rank = 0, .master_addr = "a"}); },
      "arguments master_addr and master_port or init_method should be specified, but given "
      "master_addr=a, master_port=None and init_method=None.");
}

// ignite accepts several nodes when init_method is given, "env://" included (the master's address and
// port then come from MASTER_ADDR / MASTER_PORT, or 127.0.0.1:2222).
TEST(ParallelArguments, MultiNodeWithAnInitMethodNeedsNoMasterAddress) {
  idist::Parallel p("gloo", {.nproc_per_node = 1, .nnodes = 2, .node_rank = 1, .init_method = "env://"});
  ASSERT_TRUE(p.spawn_options().has_value());
  EXPECT_EQ(p.spawn_options()->nnodes, 2);
  EXPECT_FALSE(p.spawn_options()->master_addr.has_value());
  EXPECT_FALSE(p.spawn_options()->master_port.has_value());
}

TEST(ParallelArguments, MpiWithNprocPerNode) {
  const auto names = idist::available_backends();
  if (std::find(names.begin(), names.end(), "mpi") == names.end()) GTEST_SKIP() << "mpi backend not built";
  expect_value_error([] { idist::Parallel p("mpi", {.nproc_per_node = 2}); }, "mpi backend cannot be spawned");
}

TEST(ParallelArguments, ValidSpawnParametersAreKept) {
  idist::Parallel p("gloo",
                    {.nproc_per_node = 3, .nnodes = 2, .node_rank = 1, .master_addr = "10.0.0.1", .master_port = 3344});
  ASSERT_TRUE(p.spawn_options().has_value());
  EXPECT_EQ(p.spawn_options()->nproc_per_node, 3);
  EXPECT_EQ(p.spawn_options()->nnodes, 2);
  EXPECT_EQ(p.spawn_options()->node_rank, 1);
  EXPECT_EQ(p.spawn_options()->master_addr.value_or(""), "10.0.0.1");
  EXPECT_EQ(p.spawn_options()->master_port, std::optional<int>(3344));
  EXPECT_FALSE(idist::backend().has_value()) << "a spawning Parallel must not initialize the launching process";
}

void training(int local_rank, const std::string& config) { EXPECT_EQ(config + std::to_string(local_rank), "config0"); }

TEST(ParallelSerial, RunsFnWithLocalRankZero) {
  idist::Parallel p;
  int seen_rank = -1;
  std::string seen_arg;
  testing::internal::CaptureStderr();
  p.run(
      [&](int local_rank, const std::string& s) {
        seen_rank = local_rank;
        seen_arg = s;
      },
      std::string("config"));
  p.run(training, std::string("config"));
  const std::string log = testing::internal::GetCapturedStderr();
  // ignite logs the run without a backend too: "- Run '<fn>' in 1 processes", "End of run".
  EXPECT_NE(log.find("idist.distributed.launcher.Parallel INFO: - Run '"), std::string::npos) << log;
  EXPECT_NE(log.find("- Run 'void (int, std::"), std::string::npos) << "the function's type is named: " << log;
  EXPECT_NE(log.find("' in 1 processes"), std::string::npos) << log;
  EXPECT_NE(log.find("idist.distributed.launcher.Parallel INFO: End of run"), std::string::npos) << log;
  EXPECT_EQ(seen_rank, 0);
  EXPECT_EQ(seen_arg, "config");
  EXPECT_FALSE(idist::backend().has_value());
}

}  // namespace
