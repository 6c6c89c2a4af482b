// torchrun's variables: parsing (launch/launcher_info.hpp), what discover() takes from them (node rank,
// number of nodes, the agent store) and the launcher line of show_config().
#include <gtest/gtest.h>

#include <string>

#include "idist/error.hpp"
#include "launch/launcher_info.hpp"
#include "rendezvous/discovery.hpp"

namespace {
namespace rdv = idist::rendezvous;
using idist::launch::describe_launcher;
using idist::launch::torchelastic_vars;

// What torchrun 1.13 exports to worker `rank` of `nproc` per node on node `group` of `groups`.
rdv::Environ torchrun(int rank, int local, int world, int nproc, int group, int groups, bool agent = true) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
          {"GROUP_RANK", std::to_string(group)},
          {"GROUP_WORLD_SIZE", std::to_string(groups)},
          {"ROLE_RANK", std::to_string(rank)},
          {"ROLE_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "10.0.0.1"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_USE_AGENT_STORE", agent ? "True" : "False"},
          {"TORCHELASTIC_RUN_ID", "none"},
          {"TORCHELASTIC_RESTART_COUNT", "1"},
          {"TORCHELASTIC_MAX_RESTARTS", "3"},
          {"TORCHELASTIC_ERROR_FILE", "/tmp/x/error.json"}};
}

std::string value_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const idist::ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(TorchElasticVars, ReadsTorchrunsVariables) {
  const auto vars = torchelastic_vars(torchrun(3, 1, 4, 2, 1, 2));
  ASSERT_TRUE(vars.has_value());
  EXPECT_EQ(vars->run_id, "none");
  EXPECT_EQ(vars->restart_count, 1);
  EXPECT_EQ(vars->max_restarts, 3);
  EXPECT_TRUE(vars->use_agent_store);
  EXPECT_EQ(vars->group_rank, 1);
  EXPECT_EQ(vars->group_world_size, 2);
  EXPECT_EQ(idist::launch::agent_store_prefix(*vars), "/worker/attempt_1");
}

TEST(TorchElasticVars, AbsentOutsideTorchrun) {
  EXPECT_FALSE(torchelastic_vars({{"RANK", "0"}, {"GROUP_RANK", "0"}}).has_value());  // e.g. idist::spawn
}

TEST(TorchElasticVars, TheAgentStoreOnlyForTrue) {
  auto env = torchrun(0, 0, 2, 2, 0, 1);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "true";  // torch compares with str(True)
  EXPECT_FALSE(torchelastic_vars(env)->use_agent_store);
}

TEST(TorchElasticVars, BadValuesNameTheVariable) {
  auto env = torchrun(0, 0, 2, 2, 0, 1);
  env["TORCHELASTIC_RESTART_COUNT"] = "x";
  EXPECT_NE(value_error([&] {
              torchelastic_vars(env);
            }).find("TORCHELASTIC_RESTART_COUNT should be an integer >= 0, got 'x'"),
            std::string::npos);
  env = torchrun(0, 0, 2, 2, 0, 1);
  env.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_NE(value_error([&] { torchelastic_vars(env); }).find("TORCHELASTIC_RESTART_COUNT is not set"),
            std::string::npos);
  env = torchrun(0, 0, 2, 2, 2, 2);
  EXPECT_NE(value_error([&] { torchelastic_vars(env); }).find("GROUP_RANK should be in [0, 2)"), std::string::npos);
  env = torchrun(0, 0, 2, 2, 0, 1);
  env["TORCHELASTIC_MAX_RESTARTS"] = "-1";
  EXPECT_NE(value_error([&] { torchelastic_vars(env); }).find("TORCHELASTIC_MAX_RESTARTS"), std::string::npos);
}

TEST(TorchrunDiscovery, NodeRankAndNodesFromGroupRank) {
  const auto info = rdv::discover({}, torchrun(3, 1, 4, 2, 1, 2));
  EXPECT_EQ(info.source, "env");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.nproc_per_node, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.nnodes, 2);
  EXPECT_TRUE(info.topology_exact);
  EXPECT_TRUE(info.agent_store);
  ASSERT_TRUE(info.torchelastic.has_value());
  EXPECT_EQ(info.torchelastic->restart_count, 1);
}

TEST(TorchrunDiscovery, GroupRankMustAgreeWithIgnitesRuleOnEvenNodes) {
  const auto msg = value_error([] { rdv::discover({}, torchrun(3, 1, 4, 2, 0, 2)); });
  EXPECT_NE(msg.find("GROUP_RANK = 0 disagrees with RANK / LOCAL_WORLD_SIZE = 3 / 2 = 1"), std::string::npos) << msg;
}

// Nodes with different worker counts (3 + 2): ignite's world / nproc does not describe the job; torchrun's
// numbers are taken.
TEST(TorchrunDiscovery, UnevenNodesTakeTorchrunsNumbers) {
  const auto info = rdv::discover({}, torchrun(4, 1, 5, 2, 1, 2));
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.nnodes, 2);
  EXPECT_EQ(info.nproc_per_node, 2);
}

TEST(TorchrunDiscovery, TheAgentStoreOnlyForEnvAtTorchrunsMaster) {
  EXPECT_TRUE(rdv::discover({}, torchrun(0, 0, 2, 2, 0, 1)).agent_store);
  EXPECT_FALSE(rdv::discover({}, torchrun(0, 0, 2, 2, 0, 1, false)).agent_store);  // --standalone, c10d
  idist::InitOptions tcp;
  tcp.init_method = "tcp://10.0.0.2:1234";
  EXPECT_FALSE(rdv::discover(tcp, torchrun(0, 0, 2, 2, 0, 1)).agent_store);
  idist::InitOptions file;
  file.init_method = "file:///tmp/x";
  EXPECT_FALSE(rdv::discover(file, torchrun(0, 0, 2, 2, 0, 1)).agent_store);
}

TEST(TorchrunDiscovery, WithoutTorchrunNothingChanges) {
  const auto info = rdv::discover({}, {{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "5"}});
  EXPECT_FALSE(info.torchelastic.has_value());
  EXPECT_FALSE(info.agent_store);
  EXPECT_FALSE(info.topology_exact);  // no LOCAL_WORLD_SIZE: the topology exchange decides
}

TEST(LauncherLine, NamesEachLauncher) {
  EXPECT_EQ(describe_launcher(torchrun(0, 0, 2, 2, 0, 1), true), "torchrun (run id none, restart 1 of 3, agent store)");
  EXPECT_EQ(describe_launcher(torchrun(0, 0, 2, 2, 0, 1, false), true),
            "torchrun (run id none, restart 1 of 3, idist's store at MASTER_PORT)");
  EXPECT_EQ(describe_launcher(torchrun(0, 0, 2, 2, 0, 1), false), "torchrun (run id none, restart 1 of 3)");
  EXPECT_EQ(describe_launcher({{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"}}, true), "slurm (job 42, step 0)");
  EXPECT_EQ(describe_launcher({{"OMPI_COMM_WORLD_RANK", "0"}}, false), "mpirun (Open MPI)");
  EXPECT_EQ(describe_launcher({{"PMI_RANK", "0"}}, false), "PMI (MPICH / Intel MPI / Hydra)");
  EXPECT_EQ(describe_launcher({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, true),
            "env (RANK, WORLD_SIZE: idist::spawn or another parent)");
  EXPECT_EQ(describe_launcher({}, false), "none (a single process)");
  auto bad = torchrun(0, 0, 2, 2, 0, 1);
  bad["TORCHELASTIC_RESTART_COUNT"] = "?";
  EXPECT_EQ(describe_launcher(bad, true).rfind("torchrun (its variables are malformed: ", 0), 0u);
}

}  // namespace
