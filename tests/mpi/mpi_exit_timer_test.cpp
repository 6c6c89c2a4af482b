// ExitTimer, the bound on MPI_Finalize (src/mpi/exit_timer.hpp): a process still
// inside the bounded call when the limit passes leaves with the timer's exit code and message; a
// timer disarmed in time does nothing. Each case runs in a forked child.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mpi/exit_timer.hpp"
#include "support/time_scale.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `body` in a child process, returns its wait status.
template <class Body>
int run_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExitTimer, EndsTheProcessWithItsCodeWhenTheCallOutlivesTheLimit) {
  const auto start = Clock::now();
  const int status = run_child([] {
    const idist::mpi_backend::ExitTimer timer(100ms, 7, "exit timer test: the bound fired");
    std::this_thread::sleep_for(20s);  // a call that never returns
  });
  const auto took = Clock::now() - start;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_LT(took, idist::test::scaled(5s)) << "the bound did not end the process in time";
}

TEST(ExitTimer, DisarmedInTimeLeavesTheProcessAlone) {
  const auto start = Clock::now();
  const int status = run_child([] {
    { const idist::mpi_backend::ExitTimer timer(10s, 7, "exit timer test: must not fire"); }
    std::this_thread::sleep_for(50ms);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(Clock::now() - start, idist::test::scaled(5s)) << "disarming must not wait for the limit";
}

}  // namespace
