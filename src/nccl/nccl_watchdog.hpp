#pragma once
// The watchdog thread of the nccl backend: polls each communicator's asynchronous error and each
// in-flight collective's deadline, and aborts the communicator when either goes wrong, so that
// waiting calls throw (naming the op, rank and elapsed time) instead of hanging on the GPU.
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "backend_kit/watchdog.hpp"
#include "nccl/communicator.hpp"
#include "nccl/nccl_work.hpp"

namespace idist::nccl_backend {

/// One polling thread (backend_kit::Watchdog) per NCCLBackend.
class Watchdog {
 public:
  /// Starts the thread; it works on CUDA device `device` and polls every `interval`.
  Watchdog(int device, std::chrono::milliseconds interval);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Polls `comm` for asynchronous errors until it is destroyed.
  void watch(const std::shared_ptr<Communicator>& comm);
  /// Watches `op` until its end event fires; aborts its communicator past op->deadline.
  void track(std::shared_ptr<OpState> op);
  /// Number of collectives not yet seen complete.
  std::size_t pending() const;

 private:
  void poll_once();

  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<Communicator>> comms_;
  std::vector<std::shared_ptr<OpState>> ops_;
  backend_kit::Watchdog thread_;  // last: polls once the members above exist
};

}  // namespace idist::nccl_backend
