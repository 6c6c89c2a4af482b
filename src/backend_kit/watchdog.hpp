#pragma once
// The watchdog thread shared by the backends whose waits cannot be bounded by the wait itself: mpi
// (blocking MPI calls cannot be interrupted) and nccl (kernels on the GPU). The thread wakes every
// period and hands the time to the backend's poll function, which decides what is overdue and
// what to do about it (abort the job, abort a communicator). PyTorch's policy for hung NCCL
// collectives, one thread per backend.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace idist::backend_kit {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called on the watchdog thread once every period with the current time.
  using Poll = std::function<void(Clock::time_point now)>;

  /// Starts the thread: it runs `on_start` once (e.g. selecting a CUDA device), then `poll` every
  /// `period` (milliseconds, at least 1) until the watchdog is destroyed.
  Watchdog(std::chrono::milliseconds period, Poll poll, std::function<void()> on_start = {});
  /// Stops the thread (a poll in progress finishes first) and joins it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Time between two polls.
  std::chrono::milliseconds period() const noexcept { return period_; }

  /// The period of a watchdog bounding waits of `timeout`: a twentieth of it, within [1, 250] ms,
  /// so that an overdue wait is caught between `timeout` and `timeout` + 2 periods.
  static std::chrono::milliseconds period_for(std::chrono::milliseconds timeout);

 private:
  void run(const std::function<void()>& on_start);

  std::chrono::milliseconds period_;
  Poll poll_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace idist::backend_kit
