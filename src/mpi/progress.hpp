#pragma once
// Asynchronous progress for idist's non-blocking MPI collectives. Open MPI advances a non-blocking
// collective only inside MPI calls, so a bucket all-reduce posted during backward stays on the wire
// untouched until someone polls it. The ProgressThread is that someone: it tests every request idist
// posted, in the background, until it completes, while the posting thread computes.
//
// Collectives are still posted by the calling thread, in program order, so the order on each
// communicator is the one the program wrote on every rank, and a user's blocking collective issued
// while buckets are in flight simply follows them (MPI matches collectives of one communicator in
// issue order). Needs MPI_THREAD_MULTIPLE: the thread tests while other threads post or run
// blocking calls. Between polls it sleeps (see ProgressThread()), so it does not take a core away
// from computation: the thread pays off when the wire, not memory copies, is the bottleneck, i.e.
// across hosts.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/work_impl.hpp"
#include "mpi/health.hpp"

namespace idist::mpi_backend {

/// The Work of a request driven by the ProgressThread: waiting blocks on a condition variable
/// (never inside MPI, since only the progress thread may test the request).
class ProgressWork final : public core::AsyncWorkImpl {
 public:
  ProgressWork(const char* fn, int rank, std::shared_ptr<CommHealth> health)
      : fn_(fn), rank_(rank), health_(std::move(health)) {}
  /// As AsyncWorkImpl, and a missed deadline marks the backend broken (the request stays pending).
  bool wait_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  const char* fn_;
  int rank_;
  std::shared_ptr<CommHealth> health_;
};

class ProgressThread {
 public:
  /// Starts the thread. `interval` is the pause between two polling rounds while requests are
  /// pending (nothing is polled while none is); `rank` and `health` as for MpiWork.
  ProgressThread(int rank, std::shared_ptr<CommHealth> health, std::chrono::microseconds interval);
  /// Stops and joins the thread; requests still pending are abandoned (see drain()).
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  /// Hands posted `requests` (completing together; `ints` are arrays MPI reads until then) named
  /// `fn` to the thread; the returned Work completes when they have.
  std::shared_ptr<ProgressWork> track(std::vector<MPI_Request> requests, std::vector<int> ints, const char* fn);

  /// Waits until every tracked request has completed, or `deadline`; returns how many are left.
  std::size_t drain(std::chrono::steady_clock::time_point deadline);

  /// The pause between polling rounds.
  std::chrono::microseconds interval() const noexcept { return interval_; }

 private:
  struct Entry {
    std::vector<MPI_Request> requests;
    std::vector<int> ints;
    const char* fn;
    std::shared_ptr<ProgressWork> work;
  };
  void run();
  // One MPI_Testall of `e`; true once it completed or failed (its Work is then finished).
  bool poll(Entry& e);

  int rank_;
  std::shared_ptr<CommHealth> health_;
  std::chrono::microseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;     // new entries, or stop
  std::condition_variable drained_;  // the thread's list became empty
  std::vector<Entry> incoming_;
  std::size_t pending_ = 0;  // entries handed over and not yet completed
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace idist::mpi_backend
