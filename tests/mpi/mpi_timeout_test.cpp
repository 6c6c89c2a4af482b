// Waits are bounded: with InitOptions.timeout = 2 s, a barrier that a peer skips throws TimeoutError
// on the waiting rank within a few seconds. The peer then enters the barrier late, so both ranks
// leave cleanly (MPI_Finalize on both; mpirun never hangs). Runs with exactly 2 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi_env.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr auto kTimeout = std::chrono::seconds(2);
// Long enough that the waiting rank's 2 s deadline has certainly passed.
constexpr auto kLate = std::chrono::milliseconds(4500);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Both ranks leave a test together, with a wait far longer than kTimeout.
void resync() { idist::barrier_async().wait(std::chrono::seconds(60)); }

TEST(MpiTimeout, SkippedBarrierThrowsTimeoutErrorThenCompletesWhenThePeerArrives) {
  ASSERT_EQ(idist::get_world_size(), 2);
  resync();
  if (idist::get_rank() == 0) {
    const auto t0 = Clock::now();
    idist::Work w = idist::barrier_async();
    try {
      w.wait();
      ADD_FAILURE() << "barrier completed although rank 1 skipped it";
    } catch (const idist::TimeoutError& e) {
      const double s = seconds_since(t0);
      EXPECT_GE(s, 1.9);
      EXPECT_LT(s, 4.0);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("barrier"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("2000 ms"), std::string::npos) << msg;
    }
    EXPECT_FALSE(w.is_completed());
    w.wait(std::chrono::seconds(60));  // rank 1 arrives late; the same operation then completes
    EXPECT_TRUE(w.is_completed());
  } else {
    std::this_thread::sleep_for(kLate);
    idist::barrier();
  }
  resync();
}

TEST(MpiTimeout, BlockingBarrierThrowsWithinAFewSeconds) {
  resync();
  if (idist::get_rank() == 0) {
    const auto t0 = Clock::now();
    EXPECT_THROW(idist::barrier(), idist::TimeoutError);
    EXPECT_LT(seconds_since(t0), 4.0);
  } else {
    std::this_thread::sleep_for(kLate);
    idist::barrier();  // matches rank 0's abandoned barrier, which MPI completes in the background
  }
  resync();
  // Afterwards the ranks agree again: a collective with the normal timeout works.
  EXPECT_EQ(idist::all_reduce(1), 2);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  idist::test::quiet_non_root_ranks();
  idist::InitOptions opts;
  opts.timeout = kTimeout;
  idist::initialize("mpi", opts);
  const int rc = RUN_ALL_TESTS();
  idist::finalize();
  return rc;
}
