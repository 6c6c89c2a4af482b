// The launch module (src/launch/): the environment's one reader refuses variables its table does not
// list, reads at each call, and each setting's parser names the variable, its value and what it accepts.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "launch/environment.hpp"
#include "launch/launcher_env.hpp"
#include "launch/settings.hpp"
#include "launch/variables.hpp"
#include "support/error_message.hpp"
#include "support/scoped_env.hpp"

namespace {

using idist::test::message_of;
using idist::test::ScopedEnv;
namespace launch = idist::launch;

TEST(Launch, ReadRefusesAVariableTheTableDoesNotList) {
  ScopedEnv env;
  env.set("IDIST_NOT_A_SETTING", "1");
  EXPECT_EQ(launch::find_variable("IDIST_NOT_A_SETTING"), nullptr);
  EXPECT_THROW((void)launch::read("IDIST_NOT_A_SETTING"), std::logic_error);
  EXPECT_EQ(launch::saved_value("IDIST_NOT_A_SETTING"), std::optional<std::string>("1"));  // saving any name is fine
  EXPECT_EQ(launch::snapshot().at("IDIST_NOT_A_SETTING"), "1");
}

TEST(Launch, ReadsAtEachCallAndTellsEmptyFromUnset) {
  ScopedEnv env;
  env.unset("IDIST_STORE_TOKEN");
  EXPECT_EQ(launch::read("IDIST_STORE_TOKEN"), std::nullopt);
  env.set("IDIST_STORE_TOKEN", "");
  EXPECT_EQ(launch::read("IDIST_STORE_TOKEN"), std::optional<std::string>(""));
  EXPECT_EQ(launch::read_nonempty("IDIST_STORE_TOKEN"), std::nullopt);
  env.set("IDIST_STORE_TOKEN", "secret");
  EXPECT_EQ(launch::store_token(), std::optional<std::string>("secret"));
}

TEST(Launch, BadValuesNameTheVariableTheValueAndTheAcceptedForms) {
  ScopedEnv env;
  env.set("IDIST_SPAWN_BIND", "yes");
  EXPECT_EQ(message_of([] { (void)launch::spawn_bind(); }),
            "IDIST_SPAWN_BIND is 'yes'; expected 0 (workers not pinned) or 1");
  env.set("IDIST_TRACE_BUFFER", "0");
  EXPECT_EQ(message_of([] { (void)launch::trace_buffer(); }),
            "IDIST_TRACE_BUFFER should be a number of collectives in [1, 10000000], but given '0'");
  env.set("IDIST_MPI_PROGRESS_INTERVAL_US", "0");
  EXPECT_EQ(message_of([] { (void)launch::mpi_progress_interval(); }),
            "IDIST_MPI_PROGRESS_INTERVAL_US should be a positive integer, but given '0'");
  env.set("IDIST_MPI_BLOCKING_CHUNK_BYTES", "-1");
  EXPECT_EQ(message_of([] { (void)launch::mpi_blocking_chunk_bytes(); }),
            "IDIST_MPI_BLOCKING_CHUNK_BYTES should be a non-negative integer, but given '-1'");
  env.set("IDIST_LOG_LEVEL", "loud");
  EXPECT_EQ(message_of([] { (void)launch::log_level(); }),
            "IDIST_LOG_LEVEL should be one of DEBUG, INFO, WARNING, OFF (any case), but given 'loud'");
  env.set("IDIST_GLOO_ALLREDUCE", "tree");
  EXPECT_EQ(message_of([] { (void)launch::gloo_allreduce(); }),
            "IDIST_GLOO_ALLREDUCE should be 'auto', 'ring', 'bcube' or 'posted', but given 'tree'");
  env.set("MASTER_PORT", "70000");
  EXPECT_EQ(message_of([] { (void)launch::spawn_master_port(); }),
            "spawn: the environment variable MASTER_PORT should be a port in [1, 65535], but given '70000'");
}

TEST(Launch, GoodValuesGiveTheirTypedSettings) {
  ScopedEnv env;
  env.set("IDIST_SPAWN_BIND", "0").set("IDIST_TRACE_BUFFER", "64").set("IDIST_MPI_MAX_COUNT", "99999999999");
  env.set("IDIST_LOG_LEVEL", "warning").set("IDIST_GLOO_LOOP_NICE", "off").set("IDIST_GLOO_PEER_WATCH", "10,20,3");
  env.set("IDIST_MPI_PROGRESS_THREAD", "auto").set("IDIST_DISTRIBUTED_DEBUG", "DETAIL");
  EXPECT_EQ(launch::spawn_bind(), std::optional<bool>(false));
  EXPECT_EQ(launch::trace_buffer(), std::optional<std::size_t>(64));
  EXPECT_EQ(launch::mpi_max_count(), std::optional<std::size_t>(2147483647));  // capped at INT_MAX
  EXPECT_EQ(launch::log_level(), std::optional<idist::LogLevel>(idist::LogLevel::Warning));
  EXPECT_EQ(launch::gloo_loop_nice(), std::optional<int>(0));
  const auto watch = launch::gloo_peer_watch();
  ASSERT_TRUE(watch.on && watch.times);
  EXPECT_EQ(watch.times->delay.count(), 10);
  EXPECT_EQ(watch.times->probe_timeout.count(), 20);
  EXPECT_EQ(watch.times->rounds, 3);
  EXPECT_EQ(launch::mpi_progress_thread(), std::nullopt);
  EXPECT_EQ(launch::distributed_debug(), std::optional<idist::DebugLevel>(idist::DebugLevel::Detail));
  EXPECT_EQ(launch::gloo_allreduce(), launch::GlooAllReduce::Auto);  // unset
  const std::pair<const char*, launch::GlooAllReduce> algorithms[] = {{"auto", launch::GlooAllReduce::Auto},
                                                                      {"ring", launch::GlooAllReduce::Ring},
                                                                      {"bcube", launch::GlooAllReduce::Bcube},
                                                                      {"posted", launch::GlooAllReduce::Posted}};
  for (const auto& [name, algorithm] : algorithms) {
    env.set("IDIST_GLOO_ALLREDUCE", name);
    EXPECT_EQ(launch::gloo_allreduce(), algorithm) << name;
  }
}

TEST(Launch, TheLauncherWorldSizeTakesTheFirstLauncherThatGivesOne) {
  ScopedEnv env;
  env.unset("OMPI_COMM_WORLD_SIZE").unset("SLURM_STEP_NUM_TASKS").unset("PMI_SIZE");
  EXPECT_EQ(launch::launcher_world_size(), 0);
  env.set("PMI_SIZE", "3");
  EXPECT_EQ(launch::launcher_world_size(), 3);
  env.set("SLURM_STEP_NUM_TASKS", "zero");  // not a count: the next launcher's is taken
  EXPECT_EQ(launch::launcher_world_size(), 3);
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(launch::launcher_world_size(), 2);
}

}  // namespace
