#pragma once
// Helpers of the store tests: free ports, forked worker processes with a deadline, raw sockets.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace idist::test {

/// A TCP port that was free a moment ago (bind port 0, read it, close).
int free_port();

/// Forks a child that runs `fn` and exits 0 when it returns true, 1 when it returns false or throws
/// (printing the exception). The child never returns into the test.
pid_t fork_worker(const std::function<bool()>& fn);

/// Waits for `pid` at most `timeout`; kills it (SIGKILL) when it overruns. Returns the exit code, or
/// 128 + signal when it was killed, or -1 on a timeout.
int wait_worker(pid_t pid, std::chrono::milliseconds timeout);

/// Seconds elapsed since `start`.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace idist::test
