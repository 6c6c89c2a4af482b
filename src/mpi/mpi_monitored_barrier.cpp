#include "mpi/mpi_monitored_barrier.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <string>
#include <thread>

#include "backend_kit/monitored_barrier_text.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kVerdictBytes = 512;
constexpr std::chrono::microseconds kPoll{200};

// Polls `req` until it completes (true) or `deadline` passes (false).
bool test_until(MPI_Request& req, Clock::time_point deadline, int rank) {
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", rank);
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
}

// Cancels a receive that will not be matched and releases it.
void cancel(MPI_Request& req) {
  if (req == MPI_REQUEST_NULL) return;
  MPI_Cancel(&req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

}  // namespace

void mpi_monitored_barrier(MPI_Comm comm, int comm_rank, const std::vector<int>& members, std::uint64_t generation,
                           std::chrono::milliseconds timeout, bool wait_all_ranks) {
  // Two tags per generation, within the 32767 every MPI guarantees.
  const int arrive_tag = 1000 + int(generation % 10000) * 2;
  const int verdict_tag = arrive_tag + 1;
  const int me = members[std::size_t(comm_rank)];
  if (comm_rank != 0) {
    int token = 1;
    std::array<char, kVerdictBytes> verdict{};
    MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(&token, 1, MPI_INT, 0, arrive_tag, comm, &send), "MPI_Isend", me);
    check_mpi(MPI_Irecv(verdict.data(), int(verdict.size()), MPI_CHAR, 0, verdict_tag, comm, &recv), "MPI_Irecv", me);
    if (!test_until(recv, Clock::now() + 2 * timeout, me)) {
      cancel(recv);
      MPI_Request_free(&send);  // a small message: buffered; the leader may still take it
      throw TimeoutError(backend_kit::leader_silent(me, members[0], 2 * timeout));
    }
    if (!test_until(send, Clock::now() + timeout, me)) MPI_Request_free(&send);
    verdict.back() = '\0';
    if (std::strcmp(verdict.data(), "ok") != 0)
      throw TimeoutError(backend_kit::monitored_barrier_failure(me, verdict.data()));
    return;
  }
  const std::size_t n = members.size();
  std::vector<int> tokens(n);
  std::vector<MPI_Request> arrivals(n, MPI_REQUEST_NULL);
  for (std::size_t i = 1; i < n; ++i)
    check_mpi(MPI_Irecv(&tokens[i], 1, MPI_INT, int(i), arrive_tag, comm, &arrivals[i]), "MPI_Irecv", me);
  const auto deadline = Clock::now() + timeout;
  std::vector<int> missing;
  for (std::size_t i = 1; i < n; ++i) {
    // After the deadline the remaining ranks get one last test each (wait_all_ranks).
    if (!test_until(arrivals[i], deadline, me)) {
      missing.push_back(members[i]);
      cancel(arrivals[i]);
      if (!wait_all_ranks) break;
    }
  }
  for (std::size_t i = 1; i < n; ++i) cancel(arrivals[i]);  // those not looked at after the first miss
  std::string verdict = "ok";
  if (!missing.empty()) {
    verdict = backend_kit::missing_ranks_verdict(missing, timeout);
    if (verdict.size() >= kVerdictBytes) verdict.resize(kVerdictBytes - 1);
  }
  // Every member gets the verdict, the missing ones too: a late rank then raises instead of waiting.
  std::vector<MPI_Request> sends(n, MPI_REQUEST_NULL);
  for (std::size_t i = 1; i < n; ++i)
    check_mpi(MPI_Isend(verdict.c_str(), int(verdict.size() + 1), MPI_CHAR, int(i), verdict_tag, comm, &sends[i]),
              "MPI_Isend", me);
  for (std::size_t i = 1; i < n; ++i)
    if (!test_until(sends[i], Clock::now() + std::chrono::milliseconds(100), me)) MPI_Request_free(&sends[i]);
  if (!missing.empty()) throw TimeoutError(backend_kit::monitored_barrier_failure(me, verdict));
}

}  // namespace idist::mpi_backend
