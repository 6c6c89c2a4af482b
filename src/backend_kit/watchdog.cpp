#include "backend_kit/watchdog.hpp"

#include <algorithm>
#include <utility>

namespace idist::backend_kit {

Watchdog::Watchdog(std::chrono::milliseconds period, Poll poll, std::function<void()> on_start)
    : period_(std::max(period, std::chrono::milliseconds(1))),
      poll_(std::move(poll)),
      thread_([this, start = std::move(on_start)] { run(start); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::chrono::milliseconds Watchdog::period_for(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 20, std::chrono::milliseconds(1), std::chrono::milliseconds(250));
}

void Watchdog::run(const std::function<void()>& on_start) {
  if (on_start) on_start();
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period_, [this] { return stop_; });
    if (stop_) break;
    // Polled without the lock: a poll may take long (CUDA queries) and must not delay the stop.
    lock.unlock();
    poll_(Clock::now());
    lock.lock();
  }
}

}  // namespace idist::backend_kit
