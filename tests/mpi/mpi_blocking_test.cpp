// The mpi backend with blocking collectives (the default; InitOptions::mpi_blocking_collectives): the
// model runs MPI's blocking calls under a watchdog. The collective semantics are checked by the
// conformance suite (and with IDIST_MPI_BLOCKING=0 the polled mode); this file checks the switches
// and the watchdog's bookkeeping.
// The abort itself ends the job, so it is tested by mpi_watchdog_abort.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_watchdog.hpp"
#include "mpi/single_copy.hpp"
#include "mpi_env.hpp"
#include "support/error_message.hpp"
#include "support/scoped_env.hpp"

namespace {

using idist::mpi_backend::Watchdog;
using idist::test::message_of;

TEST(MpiBlocking, BlockingCallsAreTheDefault) {
  auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->blocking_collectives());
}

TEST(MpiBlocking, BlockingCallsGiveTheSameResultsAsThePolledOnes) {
  const int n = idist::get_world_size();
  const int r = idist::get_rank();
  std::vector<double> v(1000, double(r + 1));
  idist::all_reduce(std::span<double>(v));  // MPI_Allreduce
  std::vector<double> w(1000, double(r + 1));
  idist::all_reduce_async(std::span<double>(w)).wait();  // MPI_Iallreduce
  EXPECT_EQ(v, w);
  EXPECT_DOUBLE_EQ(v.front(), n * (n + 1) / 2.0);

  std::vector<int> gathered(std::size_t(2 * n));
  const std::vector<int> mine{r, -r};
  idist::all_gather_into(std::span<const int>(mine), std::span<int>(gathered));
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(gathered[std::size_t(2 * k)], k);
    EXPECT_EQ(gathered[std::size_t(2 * k + 1)], -k);
  }
  EXPECT_EQ(idist::broadcast(r * 10 + 7, n - 1), (n - 1) * 10 + 7);
  idist::barrier();
}

TEST(MpiBlocking, BadArgumentsStillRaiseValueErrorBeforeAnyMpiCall) {
  std::vector<float> in(3), out(5);
  EXPECT_THROW(idist::all_gather_into(std::span<const float>(in), std::span<float>(out)), idist::ValueError);
  EXPECT_THROW(idist::broadcast(1, idist::get_world_size()), idist::ValueError);
  EXPECT_THROW(idist::all_reduce(1.5, idist::ReduceOp::And), idist::ValueError);
  EXPECT_EQ(idist::all_reduce(1), idist::get_world_size());  // the ranks still agree afterwards
}

// Each switch is read from its environment variable; "" counts as unset. A bad value is a
// ValueError naming the variable, the value and what is expected.
TEST(MpiBlocking, EnvironmentSwitchAcceptsZeroAndOneOnly) {
  idist::test::ScopedEnv env;
  env.set("IDIST_MPI_BLOCKING", "1");
  EXPECT_EQ(idist::mpi_backend::blocking_from_env(), std::optional<bool>(true));
  env.set("IDIST_MPI_BLOCKING", "0");
  EXPECT_EQ(idist::mpi_backend::blocking_from_env(), std::optional<bool>(false));
  env.set("IDIST_MPI_BLOCKING", "yes");
  EXPECT_NE(message_of([] { idist::mpi_backend::blocking_from_env(); }).find("should be 0 or 1, but given 'yes'"),
            std::string::npos);
  env.set("IDIST_MPI_BLOCKING", "");
  EXPECT_EQ(idist::mpi_backend::blocking_from_env(), std::nullopt);  // the default applies: blocking
}

TEST(MpiBlocking, ProgressThreadSwitchAcceptsZeroOneAndAuto) {
  idist::test::ScopedEnv env;
  env.set("IDIST_MPI_PROGRESS_THREAD", "1");
  EXPECT_EQ(idist::mpi_backend::progress_thread_from_env(), std::optional<bool>(true));
  env.set("IDIST_MPI_PROGRESS_THREAD", "0");
  EXPECT_EQ(idist::mpi_backend::progress_thread_from_env(), std::optional<bool>(false));
  env.set("IDIST_MPI_PROGRESS_THREAD", "auto");
  EXPECT_EQ(idist::mpi_backend::progress_thread_from_env(), std::nullopt);
  env.set("IDIST_MPI_PROGRESS_THREAD", "on");
  EXPECT_NE(
      message_of([] { idist::mpi_backend::progress_thread_from_env(); }).find("should be 0, 1 or auto, but given 'on'"),
      std::string::npos);
}

TEST(MpiBlocking, ProgressChunkSwitchTakesANonNegativeByteCount) {
  idist::test::ScopedEnv env;
  env.set("IDIST_MPI_PROGRESS_CHUNK_BYTES", "");
  EXPECT_EQ(idist::mpi_backend::progress_chunk_from_env(), std::size_t(4) << 20);
  env.set("IDIST_MPI_PROGRESS_CHUNK_BYTES", "0");
  EXPECT_EQ(idist::mpi_backend::progress_chunk_from_env(), 0u);
  env.set("IDIST_MPI_PROGRESS_CHUNK_BYTES", "-1");
  EXPECT_NE(message_of([] {
              idist::mpi_backend::progress_chunk_from_env();
            }).find("IDIST_MPI_PROGRESS_CHUNK_BYTES should be a non-negative integer, but given '-1'"),
            std::string::npos);
}

TEST(MpiBlocking, ProgressIntervalTakesAPositiveMicrosecondCount) {
  idist::test::ScopedEnv env;
  env.set("IDIST_MPI_PROGRESS_INTERVAL_US", "");
  EXPECT_EQ(idist::mpi_backend::progress_interval_from_env(), std::chrono::microseconds(500));
  env.set("IDIST_MPI_PROGRESS_INTERVAL_US", "400");
  EXPECT_EQ(idist::mpi_backend::progress_interval_from_env(), std::chrono::microseconds(400));
  for (const std::string bad : {"0", "-3", "5us"}) {
    env.set("IDIST_MPI_PROGRESS_INTERVAL_US", bad);
    EXPECT_NE(message_of([] {
                idist::mpi_backend::progress_interval_from_env();
              }).find("IDIST_MPI_PROGRESS_INTERVAL_US should be a positive integer, but given '" + bad + "'"),
              std::string::npos);
  }
}

TEST(MpiBlocking, BlockingChunkTakesANonNegativeByteCount) {
  idist::test::ScopedEnv env;
  env.set("IDIST_MPI_BLOCKING_CHUNK_BYTES", "");
  EXPECT_EQ(idist::mpi_backend::blocking_chunk_from_env(), std::nullopt);  // the model's rule
  env.set("IDIST_MPI_BLOCKING_CHUNK_BYTES", "0");
  EXPECT_EQ(idist::mpi_backend::blocking_chunk_from_env(), std::optional<std::size_t>(0));
  env.set("IDIST_MPI_BLOCKING_CHUNK_BYTES", "65536");
  EXPECT_EQ(idist::mpi_backend::blocking_chunk_from_env(), std::optional<std::size_t>(65536));
  env.set("IDIST_MPI_BLOCKING_CHUNK_BYTES", "1M");
  EXPECT_NE(message_of([] {
              idist::mpi_backend::blocking_chunk_from_env();
            }).find("IDIST_MPI_BLOCKING_CHUNK_BYTES should be a non-negative integer, but given '1M'"),
            std::string::npos);
}

// The single-copy probe reads what mpirun was told: "none" is seen as none; where the test is run with
// a single-copy mechanism on purpose (IDIST_TEST_EXPECT_SINGLE_COPY=1), it is seen.
TEST(MpiBlocking, SingleCopyProbeSeesOpenMpisSetting) {
  int level_before = -1, level_after = -2;
  MPI_Query_thread(&level_before);
  const bool single_copy = idist::mpi_backend::shared_memory_single_copy();
  MPI_Query_thread(&level_after);
  EXPECT_EQ(level_after, level_before) << "the probe's MPI_T session leaves MPI's thread level alone";
  const char* asked = std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
  if (asked && std::string(asked) == "none") EXPECT_FALSE(single_copy);
  if (const char* e = std::getenv("IDIST_TEST_EXPECT_SINGLE_COPY"); e && std::string(e) == "1")
    EXPECT_TRUE(single_copy) << "mpirun was given btl_vader_single_copy_mechanism " << (asked ? asked : "(default)");
  EXPECT_EQ(idist::mpi_backend::shared_memory_single_copy(), single_copy) << "a second probe reads the same";
}

// On one node of at most 4 ranks where Open MPI copies through shared memory twice, a blocking
// all-reduce above 1 MiB is a sequence of 1 MiB calls (with a single-copy mechanism, one call): the
// chunk edges (and a last partial chunk) must not show in the result.
TEST(MpiBlocking, OneNodeBlockingAllReduceInChunksIsExact) {
  auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  const bool chunked = idist::get_world_size() <= 4 && !idist::mpi_backend::shared_memory_single_copy();
  if (!std::getenv("IDIST_MPI_BLOCKING_CHUNK_BYTES"))
    EXPECT_EQ(m->blocking_chunk_bytes(), chunked ? std::size_t(1) << 20 : 0u);
  const int n = idist::get_world_size();
  const int r = idist::get_rank();
  const std::size_t count = 2 * (std::size_t(1) << 18) + 12345;  // 2 MiB of floats and a partial chunk
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = float((r + 1) * int(i % 977));
  idist::all_reduce(std::span<float>(v));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += v[i] != float(n * (n + 1) / 2 * int(i % 977));
  EXPECT_EQ(wrong, 0u);
  std::vector<double> maxes(count / 2, double(r));
  idist::all_reduce(std::span<double>(maxes), idist::ReduceOp::Max);
  EXPECT_EQ(std::count(maxes.begin(), maxes.end(), double(n - 1)), std::ptrdiff_t(maxes.size()));
}

TEST(MpiBlocking, OneNodeRunsNoProgressThreadByDefault) {
  auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  if (std::getenv("IDIST_MPI_PROGRESS_THREAD")) GTEST_SKIP() << "IDIST_MPI_PROGRESS_THREAD is set";
  EXPECT_EQ(idist::get_nnodes(), 1);
  EXPECT_FALSE(m->progress_thread());
  EXPECT_FALSE(m->has_async_progress());
}

TEST(MpiWatchdog, SixteenCallsCanBeWatchedAtOnceAndASeventeenthIsRefused) {
  Watchdog w(std::chrono::seconds(60), idist::get_rank());
  std::vector<std::unique_ptr<Watchdog::Scope>> scopes;
  for (int i = 0; i < 16; ++i) {
    scopes.push_back(std::make_unique<Watchdog::Scope>(w, "all_reduce"));
    EXPECT_TRUE(bool(*scopes.back())) << "slot " << i;
  }
  {
    const Watchdog::Scope extra(w, "barrier");
    EXPECT_FALSE(bool(extra));  // the caller falls back to the polled path
  }
  scopes.pop_back();
  const Watchdog::Scope again(w, "barrier");
  EXPECT_TRUE(bool(again));
}

TEST(MpiWatchdog, PollingPeriodIsATwentiethOfTheTimeoutWithinBounds) {
  EXPECT_EQ(Watchdog(std::chrono::seconds(2), 0).period(), std::chrono::milliseconds(100));
  EXPECT_EQ(Watchdog(std::chrono::milliseconds(5), 0).period(), std::chrono::milliseconds(1));
  EXPECT_EQ(Watchdog(std::chrono::minutes(30), 0).period(), std::chrono::milliseconds(250));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  idist::initialize("mpi");  // blocking collectives are the default
  const int rc = RUN_ALL_TESTS();
  idist::finalize();
  return rc;
}
