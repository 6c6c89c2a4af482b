// One failure scenario of the mpi backend, run by failure_cases.sh under mpirun with 2 ranks, which
// checks mpirun's exit status and the messages (never a signal such as the libnbc segfault, rc 139).
//
//   idist_mpi_failure_case <scenario> <timeout_ms>
//   count_mismatch: rank 0 all-reduces 4 floats, rank 1 8 floats;
//   never_arrives:  rank 0 all-reduces, rank 1 sleeps 4 timeouts and finalizes without joining;
//   never_arrives_async: the same with all_reduce_async (the progress thread when switched on).
// Then every rank that is still alive runs a second all_reduce and prints how it ended and after how
// long, and calls finalize(). The mode (blocking or polled, progress thread) comes from the
// environment (IDIST_MPI_BLOCKING, IDIST_MPI_PROGRESS_THREAD).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "idist/idist.hpp"

namespace {

using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t) {
  return long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// Runs `fn` and prints "rank R: <what>: returned|raised <Type> after N ms: <message>".
template <class Fn>
void report(const char* what, Fn fn) {
  const auto t0 = Clock::now();
  std::string how;
  try {
    fn();
    how = "returned";
  } catch (const idist::TimeoutError& e) {
    how = "raised TimeoutError after " + std::to_string(ms_since(t0)) + " ms: " + e.what();
  } catch (const idist::BackendError& e) {
    how = "raised BackendError after " + std::to_string(ms_since(t0)) + " ms: " + e.what();
  } catch (const idist::Error& e) {
    how = "raised Error after " + std::to_string(ms_since(t0)) + " ms: " + e.what();
  }
  std::printf("rank %d: %s: %s\n", idist::get_rank(), what, how.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s count_mismatch|never_arrives|never_arrives_async <timeout_ms>\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  idist::InitOptions opts;
  opts.timeout = std::chrono::milliseconds(std::atoi(argv[2]));
  idist::initialize("mpi", opts);
  const int rank = idist::get_rank();
  if (scenario == "count_mismatch") {
    std::vector<float> v(rank == 0 ? 4 : 8, 1.0f);
    report("first", [&] { idist::all_reduce(std::span<float>(v)); });
  } else if (scenario == "never_arrives" || scenario == "never_arrives_async") {
    if (rank == 1) {
      std::this_thread::sleep_for(4 * opts.timeout);
      std::printf("rank 1: finalizing without joining\n");
      std::fflush(stdout);
      idist::finalize();
      return 0;
    }
    std::vector<float> v(4, 1.0f);
    if (scenario == "never_arrives")
      report("first", [&] { idist::all_reduce(std::span<float>(v)); });
    else
      report("first", [&] { idist::all_reduce_async(std::span<float>(v)).wait(); });
  } else {
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
  report("second", [] { idist::all_reduce(1); });
  idist::finalize();
  std::printf("rank %d: finalized\n", rank);
  return 0;
}
