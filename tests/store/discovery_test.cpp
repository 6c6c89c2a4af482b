// Rank discovery from explicit options and environments (given as maps; nothing here reads the real
// environment except the current_environ test), ignite's SLURM rules and node-list expansion.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"

namespace {
using idist::InitOptions;
using idist::ValueError;
using idist::rendezvous::discover;
using idist::rendezvous::Environ;
using idist::rendezvous::expand_hostlist;
using idist::rendezvous::setup_ddp_vars_from_slurm_env;
using idist::rendezvous::WorldInfo;

// Expects `fn` to throw ValueError whose message contains every one of `parts`.
template <class Fn>
void expect_value_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected ValueError containing '" << parts.front() << "'";
  } catch (const ValueError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

InitOptions explicit_ranks(int rank, int world_size) {
  InitOptions o;
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const auto comma = std::min(s.find(',', pos), s.size());
    out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

Environ slurm_env(const std::string& procid, const std::string& localid, const std::string& ntasks,
                  const std::string& nnodes, const std::string& nodelist, const std::string& job_id = "12345") {
  return {{"SLURM_PROCID", procid},        {"SLURM_LOCALID", localid},       {"SLURM_NTASKS", ntasks},
          {"SLURM_JOB_NUM_NODES", nnodes}, {"SLURM_JOB_NODELIST", nodelist}, {"SLURM_JOB_ID", job_id}};
}
}  // namespace

// ---------------------------------------------------------------- defaults and explicit options

TEST(Discovery, NoSourceIsASingleProcessWithIgnitesDefaults) {
  const auto info = discover({}, {});
  EXPECT_EQ(info.source, "default");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.nproc_per_node, 1);
  EXPECT_EQ(info.nnodes, 1);
  EXPECT_EQ(info.node_rank, 0);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 15000);
  EXPECT_TRUE(info.topology_exact);
  EXPECT_TRUE(info.local_rank_known);
}

TEST(Discovery, MasterAddrAndPortFromTheEnvironment) {
  const auto info = discover({}, {{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "2345"}});
  EXPECT_EQ(info.master_addr, "node7");
  EXPECT_EQ(info.master_port, 2345);
  expect_value_error([] { discover({}, {{"MASTER_PORT", "http"}}); }, {"MASTER_PORT", "'http'", "integer"});
  expect_value_error([] { discover({}, {{"MASTER_PORT", "0"}}); }, {"MASTER_PORT", "[1, 65535]", "got 0"});
  expect_value_error([] { discover({}, {{"MASTER_PORT", "70000"}}); }, {"MASTER_PORT", "70000"});
}

TEST(Discovery, ExplicitOptionsWin) {
  const Environ env = {{"RANK", "0"},
                       {"LOCAL_RANK", "0"},
                       {"WORLD_SIZE", "8"},
                       {"OMPI_COMM_WORLD_RANK", "5"},
                       {"OMPI_COMM_WORLD_SIZE", "8"}};
  const auto info = discover(explicit_ranks(2, 4), env);
  EXPECT_EQ(info.source, "options");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  // LOCAL_RANK of the environment is the local rank (a launcher sets it with explicit ranks).
  EXPECT_TRUE(info.local_rank_known);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_FALSE(info.topology_exact);
}

TEST(Discovery, ExplicitOptionsWithoutALocalRankLeaveItToTheTopologyExchange) {
  const auto info = discover(explicit_ranks(3, 4), {});
  EXPECT_FALSE(info.local_rank_known);
  EXPECT_FALSE(info.topology_exact);
  auto opts = explicit_ranks(3, 4);
  opts.local_rank = 1;
  const auto with_local = discover(opts, {{"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_TRUE(with_local.local_rank_known);
  EXPECT_EQ(with_local.local_rank, 1);
  EXPECT_TRUE(with_local.topology_exact);
  EXPECT_EQ(with_local.nproc_per_node, 2);
  EXPECT_EQ(with_local.nnodes, 2);
  EXPECT_EQ(with_local.node_rank, 1);
}

// ignite's order for the local rank: LOCAL_RANK, then the set_local_rank() hint, then host names.
TEST(Discovery, LocalRankHintFillsOnlyAMissingLocalRank) {
  const auto hinted = discover(explicit_ranks(3, 4), {}, 1);
  EXPECT_TRUE(hinted.local_rank_known);
  EXPECT_EQ(hinted.local_rank, 1);
  EXPECT_FALSE(hinted.topology_exact);  // nproc_per_node still needs every rank's local rank
  const auto env_wins = discover(explicit_ranks(3, 4), {{"LOCAL_RANK", "3"}}, 1);
  EXPECT_EQ(env_wins.local_rank, 3);
  auto opts = explicit_ranks(3, 4);
  opts.local_rank = 2;
  EXPECT_EQ(discover(opts, {}, 1).local_rank, 2);  // an explicit local rank beats the hint
  const auto pmi = discover({}, {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, 0);
  EXPECT_TRUE(pmi.local_rank_known);
  EXPECT_EQ(pmi.local_rank, 0);
  expect_value_error([] { discover(explicit_ranks(1, 2), {}, 2); }, {"local rank hint 2", "[0, 2)"});
  EXPECT_EQ(discover(explicit_ranks(0, 1), {}, 5).local_rank, 0);  // a single process is local rank 0
}

TEST(Discovery, ExplicitOptionsErrors) {
  expect_value_error([] { discover(explicit_ranks(1, -1), {}); },
                     {"Both rank and world_size should be provided", "rank=1", "world_size=-1"});
  expect_value_error([] { discover(explicit_ranks(-1, 4), {}); }, {"Both rank and world_size", "world_size=4"});
  expect_value_error([] { discover(explicit_ranks(4, 4), {}); }, {"rank should be in [0, 4)", "got 4"});
  expect_value_error([] { discover(explicit_ranks(0, 0), {}); }, {"world_size should be >= 1", "got 0"});
  expect_value_error([] { discover(explicit_ranks(-3, 2), {}); }, {"rank should be >= 0 (or -1", "got -3"});
  auto opts = explicit_ranks(0, 2);
  opts.local_rank = 2;
  expect_value_error([&] { discover(opts, {}); }, {"local_rank should be in [0, 2)", "got 2"});
  opts.local_rank = 1;
  expect_value_error([&] { discover(opts, {{"LOCAL_WORLD_SIZE", "1"}}); }, {"local_rank", "1 processes per node"});
}

TEST(Discovery, ExplicitOptionsAreAcceptedInsideASlurmJob) {
  // ignite raises "Arguments rank and world_size should not be specified with SLURM"; idist's contract puts
  // explicit options first so that spawn / Parallel work inside an allocation.
  const auto info = discover(explicit_ranks(1, 2), slurm_env("0", "0", "1", "1", "c1"));
  EXPECT_EQ(info.source, "options");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
}

// ---------------------------------------------------------------- torchrun variables

TEST(Discovery, TorchrunVariables) {
  const auto info = discover(
      {},
      {{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.source, "env");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_FALSE(info.topology_exact);  // nproc = max local rank + 1 needs every rank
}

TEST(Discovery, TorchrunLocalWorldSizeGivesTheTopology) {
  const auto info = discover({}, {{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}});
  EXPECT_TRUE(info.topology_exact);
  EXPECT_TRUE(info.nproc_from_env);
  EXPECT_EQ(info.nproc_per_node, 4);
  EXPECT_EQ(info.nnodes, 2);
  EXPECT_EQ(info.node_rank, 1);
  expect_value_error(
      [] {
        discover({}, {{"RANK", "0"}, {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "2"}});
      },
      {"LOCAL_WORLD_SIZE = 2", "local rank 2"});
  expect_value_error(
      [] {
        discover({}, {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}});
      },
      {"LOCAL_WORLD_SIZE should be in [1, 2]", "got 3"});
}

TEST(Discovery, TorchrunVariablesAllThreeOrNone) {
  const std::vector<std::string> names = {"RANK", "LOCAL_RANK", "WORLD_SIZE"};
  for (int mask = 1; mask < 7; ++mask) {  // every non-empty proper subset
    Environ env;
    std::vector<std::string> missing;
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i))
        env[names[i]] = "0";
      else
        missing.push_back(names[i]);
    }
    try {
      discover({}, env);
      ADD_FAILURE() << "mask " << mask << ": expected ValueError";
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("PyTorch distributed configuration should define env variables"), std::string::npos) << msg;
      const auto tail = msg.substr(msg.find(", but ["));
      for (const auto& n : names) {
        const bool named = tail.find("'" + n + "'") != std::string::npos;
        EXPECT_EQ(named, std::find(missing.begin(), missing.end(), n) != missing.end()) << n << " in: " << msg;
      }
    }
  }
}

TEST(Discovery, TorchrunValuesAreChecked) {
  expect_value_error(
      [] {
        discover({}, {{"RANK", "one"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}});
      },
      {"RANK should be an integer, got 'one'"});
  expect_value_error(
      [] {
        discover({}, {{"RANK", "2"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}});
      },
      {"RANK should be in [0, 2)", "got 2"});
  expect_value_error(
      [] {
        discover({}, {{"RANK", "0"}, {"LOCAL_RANK", "-1"}, {"WORLD_SIZE", "2"}});
      },
      {"LOCAL_RANK should be in [0, 2)", "got -1"});
  expect_value_error(
      [] {
        discover({}, {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "0"}});
      },
      {"WORLD_SIZE should be >= 1"});
}

TEST(Discovery, TorchrunVariablesBeatOpenMpiAndPmi) {
  const auto info = discover({}, {{"RANK", "1"},
                                  {"LOCAL_RANK", "1"},
                                  {"WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_RANK", "0"},
                                  {"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"PMI_RANK", "0"},
                                  {"PMI_SIZE", "2"}});
  EXPECT_EQ(info.source, "env");
  EXPECT_EQ(info.rank, 1);
}

// ---------------------------------------------------------------- Open MPI and PMI

TEST(Discovery, OpenMpiVariables) {
  const auto info = discover({}, {{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_TRUE(info.topology_exact);
  EXPECT_EQ(info.nproc_per_node, 2);
  EXPECT_EQ(info.nnodes, 2);
  EXPECT_EQ(info.node_rank, 1);
  const auto no_local = discover({}, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_FALSE(no_local.local_rank_known);
  EXPECT_FALSE(no_local.topology_exact);
  expect_value_error(
      [] {
        discover({}, {{"OMPI_COMM_WORLD_RANK", "1"}});
      },
      {"Open MPI configuration", "'OMPI_COMM_WORLD_SIZE'] are missing"});
  expect_value_error(
      [] {
        discover({}, {{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
      },
      {"OMPI_COMM_WORLD_RANK should be in [0, 4)"});
}

TEST(Discovery, OpenMpiBeatsPmi) {
  const auto info = discover(
      {}, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 1);
}

TEST(Discovery, PmiVariables) {
  const auto info = discover({}, {{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}});
  EXPECT_EQ(info.source, "pmi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 3);
  EXPECT_FALSE(info.local_rank_known);
  const auto hydra =
      discover({}, {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_TRUE(hydra.local_rank_known);
  EXPECT_EQ(hydra.local_rank, 1);
  EXPECT_EQ(hydra.nproc_per_node, 2);
  EXPECT_EQ(hydra.node_rank, 1);
  expect_value_error([] { discover({}, {{"PMI_SIZE", "2"}}); }, {"PMI configuration", "'PMI_RANK'] are missing"});
  expect_value_error([] { discover({}, {{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}); }, {"PMI_RANK should be an integer"});
}

TEST(Discovery, ExplicitLocalRankOverridesTheSource) {
  InitOptions opts;
  opts.local_rank = 1;
  const auto info = discover(opts, {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_TRUE(info.local_rank_known);
  EXPECT_EQ(info.local_rank, 1);
}

TEST(Discovery, SingleProcessIsAlwaysExact) {
  const auto info = discover({}, {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_TRUE(info.topology_exact);
  EXPECT_EQ(info.nproc_per_node, 1);
  EXPECT_EQ(info.nnodes, 1);
}

// ---------------------------------------------------------------- init methods

TEST(Discovery, InitMethods) {
  InitOptions opts;
  opts.init_method = "tcp://10.1.2.3:4567";
  const auto tcp = discover(opts, {{"MASTER_ADDR", "ignored"}, {"MASTER_PORT", "1111"}});
  EXPECT_EQ(tcp.master_addr, "10.1.2.3");
  EXPECT_EQ(tcp.master_port, 4567);
  opts.init_method = "tcp://[::1]:2222";
  const auto v6 = discover(opts, {});
  EXPECT_EQ(v6.master_addr, "::1");
  EXPECT_EQ(v6.master_port, 2222);
  opts.init_method = "file:///tmp/some/store";
  EXPECT_EQ(discover(opts, {}).source, "default");
  opts.init_method = "";
  EXPECT_EQ(discover(opts, {}).master_port, 15000);  // "" counts as env://
  for (const char* bad : {"tcp://host", "tcp://host:", "tcp://:1234", "tcp://host:port", "tcp://host:0", "tcp://[::1]"})
    expect_value_error(
        [&] {
          InitOptions o;
          o.init_method = bad;
          discover(o, {});
        },
        {bad});
  expect_value_error(
      [] {
        InitOptions o;
        o.init_method = "file://";
        discover(o, {});
      },
      {"file:///path/to/store"});
  expect_value_error(
      [] {
        InitOptions o;
        o.init_method = "ftp://x";
        discover(o, {});
      },
      {"init_method should be 'env://', 'tcp://host:port' or 'file:///path', got 'ftp://x'"});
}

// ---------------------------------------------------------------- SLURM

TEST(Slurm, IgnitesSetupDdpVarsCases) {
  struct Case {
    Environ env;
    int rank, local_rank, world_size;
    std::string addr;
    int port;
  };
  auto with = [](Environ env, Environ extra) {
    env.insert(extra.begin(), extra.end());
    return env;
  };
  const std::vector<Case> cases = {
      // usual SLURM env
      {slurm_env("1", "1", "2", "1", "c1"), 1, 1, 2, "c1", 17345},
      // usual SLURM env, two nodes
      {slurm_env("5", "1", "8", "2", "c1, c2"), 5, 1, 8, "c1", 17345},
      // one node, one task + torch.distributed.launch
      {with(slurm_env("0", "0", "1", "1", "c1"), {{"MASTER_ADDR", "127.0.0.1"},
                                                  {"MASTER_PORT", "2233"},
                                                  {"RANK", "2"},
                                                  {"LOCAL_RANK", "2"},
                                                  {"WORLD_SIZE", "8"}}),
       2, 2, 8, "127.0.0.1", 2233},
      // enroot's pytorch hook
      {with(slurm_env("3", "3", "4", "1", "c1"),
            {{"MASTER_ADDR", "c1"}, {"MASTER_PORT", "12233"}, {"RANK", "3"}, {"LOCAL_RANK", "3"}, {"WORLD_SIZE", "4"}}),
       3, 3, 4, "c1", 12233},
      // two nodes + enroot's pytorch hook
      {with(slurm_env("3", "1", "4", "2", "c1, c2"),
            {{"MASTER_ADDR", "c1"}, {"MASTER_PORT", "12233"}, {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}}),
       3, 1, 4, "c1", 12233},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto v = setup_ddp_vars_from_slurm_env(c.env);
    EXPECT_EQ(v.rank, c.rank) << "case " << i;
    EXPECT_EQ(v.local_rank, c.local_rank) << "case " << i;
    EXPECT_EQ(v.world_size, c.world_size) << "case " << i;
    EXPECT_EQ(v.master_addr, c.addr) << "case " << i;
    EXPECT_EQ(v.master_port, c.port) << "case " << i;
    EXPECT_TRUE(v.warnings.empty()) << "case " << i;
    // discover() takes the same values from a SLURM job.
    const auto info = discover({}, c.env);
    EXPECT_EQ(info.source, "slurm");
    EXPECT_EQ(info.rank, c.rank);
    EXPECT_EQ(info.local_rank, c.local_rank);
    EXPECT_EQ(info.world_size, c.world_size);
    EXPECT_EQ(info.master_addr, c.addr);
    EXPECT_EQ(info.master_port, c.port);
  }
}

TEST(Slurm, InconsistentTorchrunVariablesAcrossNodes) {
  auto env = slurm_env("3", "1", "4", "2", "c1, c2");
  env.insert({{"MASTER_ADDR", "another-addr"},
              {"MASTER_PORT", "12233"},
              {"RANK", "1"},
              {"LOCAL_RANK", "1"},
              {"WORLD_SIZE", "2"}});
  expect_value_error([&] { setup_ddp_vars_from_slurm_env(env); },
                     {"Environment variable defined for PyTorch Distributed context is inconsistent with equivalent "
                      "SLURM env variable",
                      "RANK: 1 vs 3", "SLURM vars", "PTH vars"});
  expect_value_error([&] { discover({}, env); }, {"inconsistent"});
}

TEST(Slurm, TorchrunVariablesSmallerThanSlurmsOnOneNode) {
  auto env = slurm_env("1", "1", "4", "1", "c1");
  env.insert({{"MASTER_ADDR", "another-addr"},
              {"MASTER_PORT", "12233"},
              {"RANK", "1"},
              {"LOCAL_RANK", "1"},
              {"WORLD_SIZE", "2"}});
  expect_value_error([&] { setup_ddp_vars_from_slurm_env(env); },
                     {"inconsistent", "We expect that WORLD_SIZE: 2 >= 4"});
}

TEST(Slurm, PartialTorchrunVariablesAreIgnoredWithIgnitesWarning) {
  auto env = slurm_env("3", "1", "4", "2", "c1, c2");
  env.insert({{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"}});
  const auto v = setup_ddp_vars_from_slurm_env(env);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("We detected the following env variables"), std::string::npos) << v.warnings[0];
  EXPECT_NE(v.warnings[0].find("'MASTER_ADDR', 'MASTER_PORT'"), std::string::npos) << v.warnings[0];
  EXPECT_EQ(v.rank, 3);  // SLURM's values
  EXPECT_EQ(v.world_size, 4);
  const auto info = discover({}, env);
  EXPECT_EQ(info.rank, 3);
  ASSERT_EQ(info.warnings.size(), 1u);
  // A lone RANK inside SLURM is the same warning, not the torchrun "all three or none" error.
  auto lone = slurm_env("0", "0", "1", "1", "localhost");
  lone["RANK"] = "1";
  EXPECT_EQ(discover({}, lone).warnings.size(), 1u);
}

TEST(Slurm, NoHostInTheNodeList) {
  expect_value_error([] { setup_ddp_vars_from_slurm_env(slurm_env("1", "1", "4", "1", "[]")); },
                     {"No hostname detected in SLURM_JOB_NODELIST", "(nodelist=[])"});
  expect_value_error([] { setup_ddp_vars_from_slurm_env(slurm_env("1", "1", "4", "1", "x[]")); },
                     {"hostlist invalid : x[]"});
}

TEST(Slurm, MissingVariables) {
  for (const char* name :
       {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES"}) {
    auto env = slurm_env("0", "0", "1", "1", "c1");
    env.erase(name);
    expect_value_error([&] { discover({}, env); },
                       {"SLURM distributed configuration is missing '" + std::string(name) + "' in env variables"});
  }
  expect_value_error([] { discover({}, {{"SLURM_JOB_ID", "1"}}); }, {"SLURM distributed configuration is missing"});
}

TEST(Slurm, MasterAddressAndPort) {
  const auto info = discover({}, slurm_env("0", "0", "20", "20", "node[18-19,1-16,21-22]", "987654"));
  EXPECT_EQ(info.master_addr, "node1");
  EXPECT_EQ(info.master_port, 15000 + 7654);
  EXPECT_EQ(discover({}, slurm_env("0", "0", "1", "1", "c1", "7")).master_port, 15007);
  expect_value_error([] { discover({}, slurm_env("0", "0", "1", "1", "c1", "12ab")); }, {"SLURM_JOB_ID"});
  expect_value_error([] { discover({}, slurm_env("x", "0", "1", "1", "c1")); }, {"SLURM_PROCID should be an integer"});
  expect_value_error([] { discover({}, slurm_env("2", "0", "2", "1", "c1")); },
                     {"SLURM_PROCID (or RANK) should be in [0, 2)"});
}

TEST(Slurm, TopologyIsLeftToTheExchange) {
  const auto info = discover({}, slurm_env("5", "1", "8", "2", "c1, c2"));
  EXPECT_TRUE(info.local_rank_known);
  EXPECT_FALSE(info.topology_exact);
}

// ---------------------------------------------------------------- expand_hostlist (ignite's cases)

TEST(ExpandHostlist, IgnitesCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"localhost", "localhost"},
      {"compute!:b24_[1-2].r", "compute!:b24_1.r,compute!:b24_2.r"},
      {"quartz[4-8]", "quartz4,quartz5,quartz6,quartz7,quartz8"},
      {"c1001a-[11,17]", "c1001a-11,c1001a-17"},
      {"c1001a-s[11,17]", "c1001a-s11,c1001a-s17"},
      {"c1009a-s17,c1010a-s11", "c1009a-s17,c1010a-s11"},
      {"gpu-compute-on-demand-dy-g4dnxlarge-[1-4]",
       "gpu-compute-on-demand-dy-g4dnxlarge-1,gpu-compute-on-demand-dy-g4dnxlarge-2,"
       "gpu-compute-on-demand-dy-g4dnxlarge-3,gpu-compute-on-demand-dy-g4dnxlarge-4"},
      {"node[18-19,1-16,21-22]",
       "node1,node2,node3,node4,node5,node6,node7,node8,node9,node10,node11,node12,node13,node14,node15,node16,"
       "node18,node19,node21,node22"},
      {"node[4-8,12,16-20,22,24-26]",
       "node4,node5,node6,node7,node8,node12,node16,node17,node18,node19,node20,node22,node24,node25,node26"},
      {"machine2-[02-4]vm1", "machine2-02vm1,machine2-03vm1,machine2-04vm1"},
      {"machine2-[02-3]vm1, machine4-[0003-5].vml2",
       "machine2-02vm1,machine2-03vm1,machine4-0003.vml2,machine4-0004.vml2,machine4-0005.vml2"},
      {"machine2-[009-11]vm1", "machine2-009vm1,machine2-010vm1,machine2-011vm1"},
      {"node[1,2,3]", "node1,node2,node3"},
      {"compute-b24-[1-3,5-9], compute-b25-[1,4,8],compute-b25-[2-9,13]",
       "compute-b24-1,compute-b24-2,compute-b24-3,compute-b24-5,compute-b24-6,compute-b24-7,compute-b24-8,"
       "compute-b24-9,compute-b25-1,compute-b25-4,compute-b25-8,compute-b25-2,compute-b25-3,compute-b25-4,"
       "compute-b25-5,compute-b25-6,compute-b25-7,compute-b25-8,compute-b25-9,compute-b25-13"},
  };
  for (const auto& [list, expected] : cases) EXPECT_EQ(expand_hostlist(list), split(expected)) << list;
}

TEST(ExpandHostlist, InvalidLists) {
  expect_value_error([] { expand_hostlist("x[]"); }, {"hostlist invalid : x[]"});
  expect_value_error([] { expand_hostlist("invalid[]"); }, {"hostlist invalid"});
  for (const char* bad :
       {"a[1-2", "a]1", "a[3-1]", "a[1-2]b[3]", "a[x]", "a[1-]", "a[1,,2]", "[1-2]", "a[[1]]", "n[0-99999999999]"})
    expect_value_error([&] { expand_hostlist(bad); }, {"hostlist invalid", bad});
}

TEST(ExpandHostlist, EdgeCases) {
  EXPECT_TRUE(expand_hostlist("").empty());
  EXPECT_TRUE(expand_hostlist("[]").empty());  // as ignite: no host, no error here
  EXPECT_EQ(expand_hostlist("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(expand_hostlist("n[0-2]"), (std::vector<std::string>{"n0", "n1", "n2"}));  // "0" is not zero padding
  EXPECT_EQ(expand_hostlist("n[3,1,3]"), (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(expand_hostlist("n[1] , m"), (std::vector<std::string>{"n1", "m"}));
}

// ---------------------------------------------------------------- the real environment

TEST(Discovery, CurrentEnvironIsTheProcessEnvironment) {
  ::setenv("IDIST_DISCOVERY_TEST_VAR", "a=b", 1);
  const auto env = idist::rendezvous::current_environ();
  ASSERT_TRUE(env.count("IDIST_DISCOVERY_TEST_VAR"));
  EXPECT_EQ(env.at("IDIST_DISCOVERY_TEST_VAR"), "a=b");
  ::unsetenv("IDIST_DISCOVERY_TEST_VAR");
}
