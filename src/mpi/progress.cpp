// The progress thread of the mpi backend (see progress.hpp).
#include "mpi/progress.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

bool ProgressWork::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (AsyncWorkImpl::wait_until(deadline)) return true;
  health_->mark(
      fmt::format("{} on rank {} timed out (a peer never joined it, or the ranks issued different "
                  "collectives)",
                  fn_, rank_));
  return false;
}

ProgressThread::ProgressThread(int rank, std::shared_ptr<CommHealth> health, std::chrono::microseconds interval)
    : rank_(rank), health_(std::move(health)), interval_(interval), thread_([this] { run(); }) {}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<ProgressWork> ProgressThread::track(std::vector<MPI_Request> requests, std::vector<int> ints,
                                                    const char* fn) {
  auto work = std::make_shared<ProgressWork>(fn, rank_, health_);
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(Entry{std::move(requests), std::move(ints), fn, work});
    ++pending_;
  }
  wake_.notify_one();
  return work;
}

std::size_t ProgressThread::drain(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  drained_.wait_until(lock, deadline, [&] { return pending_ == 0; });
  return pending_;
}

bool ProgressThread::poll(Entry& e) {
  int flag = 0;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Testall(int(e.requests.size()), e.requests.data(), &flag, MPI_STATUSES_IGNORE);
  }
  if (rc != MPI_SUCCESS) {
    std::exception_ptr error;
    try {
      health_->fail(rc, e.fn, rank_);
    } catch (...) {
      error = std::current_exception();
    }
    e.work->finish(error);
    return true;
  }
  if (flag) e.work->finish();
  return flag != 0;
}

void ProgressThread::run() {
  std::vector<Entry> active;  // owned by this thread: only it tests the requests
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (active.empty()) wake_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
      if (stop_) return;
      for (auto& e : incoming_) active.push_back(std::move(e));
      incoming_.clear();
    }
    // Oldest first: collectives of a communicator complete in issue order anyway.
    std::size_t done = 0;
    for (auto it = active.begin(); it != active.end();) {
      if (poll(*it)) {
        it = active.erase(it);
        ++done;
      } else {
        ++it;
      }
    }
    if (done) {
      std::lock_guard lock(mutex_);
      pending_ -= done;
      if (pending_ == 0) drained_.notify_all();
    }
    // Sleep rather than spin: each poll moves what the transport has buffered (TCP socket buffers
    // hold milliseconds of a 1-10 Gbit/s link), and a spinning thread would steal the core that
    // backward runs on; even frequent short sleeps cost backward more than the overlap gained
    // (docs/performance.md, "Figures behind the defaults").
    if (!active.empty()) std::this_thread::sleep_for(interval_);
  }
}

}  // namespace idist::mpi_backend
