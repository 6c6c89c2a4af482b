// monitored_barrier on real ranks: everyone arrives; late ranks are named on the leader, on the ranks
// that arrived and on the late ranks themselves when they finally call it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <thread>

#include "idist/idist.hpp"

namespace {

using namespace std::chrono_literals;

// Calls monitored_barrier and returns the TimeoutError's message ("" when it returned).
std::string outcome(std::chrono::milliseconds timeout, bool wait_all) {
  try {
    idist::monitored_barrier(timeout, wait_all);
    return "";
  } catch (const idist::TimeoutError& e) {
    return e.what();
  }
}

TEST(MonitoredBarrier, EveryRankArrives) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outcome(5000ms, i % 2 == 1), "");
}

TEST(MonitoredBarrier, RejectsNonPositiveTimeout) { EXPECT_THROW(idist::monitored_barrier(0ms), idist::ValueError); }

TEST(MonitoredBarrier, LateRankIsNamedOnEveryRank) {
  const int n = idist::get_world_size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const bool late = idist::get_rank() == n - 1;
  if (late) std::this_thread::sleep_for(1500ms);  // past the others' 300 ms
  const std::string what = outcome(300ms, false);
  EXPECT_NE(what.find(fmt::format("rank {} did not reach monitored_barrier within 300 ms", n - 1)), std::string::npos)
      << what;
  idist::barrier();  // the group is still usable
  EXPECT_EQ(outcome(5000ms, false), "");
}

TEST(MonitoredBarrier, WaitAllRanksNamesEveryMissingRank) {
  const int n = idist::get_world_size();
  if (n < 3) GTEST_SKIP() << "needs 3 ranks or more";
  std::string expected_all = "ranks ";
  for (int r = 1; r < n; ++r) expected_all += fmt::format("{}{}", r > 1 ? ", " : "", r);
  for (bool wait_all : {false, true}) {
    if (idist::get_rank() != 0) std::this_thread::sleep_for(1500ms);
    const std::string what = outcome(300ms, wait_all);
    const std::string expected = wait_all ? expected_all : std::string("rank 1");
    EXPECT_NE(what.find(expected + " did not reach monitored_barrier within 300 ms"), std::string::npos)
        << "wait_all_ranks " << wait_all << ": " << what;
    idist::barrier();
  }
}

}  // namespace
