// Waits are bounded in the polled mode (InitOptions::mpi_blocking_collectives = false): with a 2 s
// timeout, a barrier that a peer skips throws TimeoutError on the waiting rank within a few seconds.
// That breaks the backend: the next collective raises BackendError at once naming the timeout, and
// finalize() aborts the job with that message (exit code 1) instead of calling MPI_Finalize on the
// abandoned request. ctest checks the abort message; runs with exactly 2 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi_env.hpp"
#include "support/time_scale.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(2);
// Long enough that the waiting rank's 2 s deadline has certainly passed.
constexpr auto kLate = std::chrono::milliseconds(4500);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(MpiTimeout, SkippedBarrierThrowsTimeoutErrorThenTheBackendIsBroken) {
  ASSERT_EQ(idist::get_world_size(), 2);
  idist::barrier_async().wait(std::chrono::seconds(60));  // both ranks start together
  if (idist::get_rank() == 0) {
    const auto t0 = Clock::now();
    idist::Work w = idist::barrier_async();
    try {
      w.wait();
      ADD_FAILURE() << "barrier completed although rank 1 skipped it";
    } catch (const idist::TimeoutError& e) {
      const double s = seconds_since(t0);
      EXPECT_GE(s, 1.9);
      EXPECT_LT(s, 2.0 + idist::test::scaled(2.0));
      const std::string msg = e.what();
      EXPECT_NE(msg.find("barrier"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("2000 ms"), std::string::npos) << msg;
    }
    // Every later collective raises at once, naming the first failure.
    const auto t1 = Clock::now();
    try {
      idist::all_reduce(1);
      ADD_FAILURE() << "all_reduce ran on a broken backend";
    } catch (const idist::BackendError& e) {
      // "At once": well under the 2 s a wait would take if the broken state went unnoticed (a quarter of
      // it at scale 1, and still under it at ASan's scale 3), not a figure a busy 2-core machine misses.
      EXPECT_LT(seconds_since(t1), idist::test::scaled(0.5));
      const std::string msg = e.what();
      EXPECT_NE(msg.find("all_reduce on rank 0: the mpi backend is unusable since an earlier failure: MPI_Ibarrier on "
                         "rank 0 timed out"),
                std::string::npos)
          << msg;
    }
    EXPECT_THROW(idist::barrier(), idist::BackendError);
    EXPECT_THROW(idist::broadcast(1, 0), idist::BackendError);
    EXPECT_THROW(idist::all_gather(1), idist::BackendError);
    // The abandoned request itself still completes once rank 1 arrives late.
    w.wait(std::chrono::seconds(60));
    EXPECT_TRUE(w.is_completed());
  } else {
    std::this_thread::sleep_for(kLate);
    idist::barrier();  // matches rank 0's abandoned barrier
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  idist::InitOptions opts;
  opts.timeout = kTimeout;
  opts.mpi_blocking_collectives = false;
  idist::initialize("mpi", opts);
  const int rc = RUN_ALL_TESTS();
  std::fflush(stdout);
  idist::finalize();  // rank 0 aborts the job here (broken backend); ctest expects its message
  return rc;
}
