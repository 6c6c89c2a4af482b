#include "mpi/mpi_exit_timer.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

namespace idist::mpi_backend {

ExitTimer::ExitTimer(std::chrono::milliseconds limit, int code, std::string message) {
  thread_ = std::thread([this, limit, code, message = std::move(message)] {
    std::unique_lock lock(mutex_);
    if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  });
}

ExitTimer::~ExitTimer() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void abort_job(int rank, int code) {
  const ExitTimer bound(std::chrono::seconds(5), code,
                        fmt::format("idist: rank {}: MPI_Abort did not end the job within 5 s (the launcher did not "
                                    "answer); this rank leaves by itself with exit code {}",
                                    rank, code));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // should MPI_Abort return
}

}  // namespace idist::mpi_backend
