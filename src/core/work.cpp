// Work handle: deadline-bounded waits and continuations.
#include "idist/work.hpp"

#include <time.h>

#include <string>
#include <vector>

#include "idist/error.hpp"

namespace idist {

namespace detail {

void AsyncWorkImpl::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

bool AsyncWorkImpl::test() {
  std::lock_guard lock(mutex_);
  return done_;
}

bool AsyncWorkImpl::wait_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!done_cv_.wait_until(lock, deadline, [&] { return done_; })) return false;
  if (error_) std::rethrow_exception(error_);
  return true;
}

}  // namespace detail

namespace {

// The start of an operation only anchors its default deadline, whose unit is the user's timeout
// (seconds to minutes): the coarse monotonic clock (same epoch as steady_clock, a few ms of
// resolution) costs a few ns where a precise read costs ~100 ns on virtual machines, and it is read
// once per collective.
std::chrono::steady_clock::time_point coarse_now() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return std::chrono::steady_clock::now();
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace

struct Work::State {
  std::shared_ptr<detail::WorkImpl> impl;
  std::string op;
  int rank = 0;
  std::chrono::steady_clock::time_point start;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;  // serialises wait() so continuations run exactly once
  bool finished = false;
  std::vector<std::function<void()>> continuations;
  std::vector<std::shared_ptr<void>> keep_alive;
};

Work::Work() : state_(std::make_shared<State>()) { state_->finished = true; }

Work::Work(std::shared_ptr<detail::WorkImpl> impl, std::string_view op, int rank, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  state_->impl = std::move(impl);
  state_->op = op;
  state_->rank = rank;
  state_->start = coarse_now();
  state_->timeout = timeout;
}

bool Work::is_completed() {
  std::lock_guard lock(state_->mutex);
  return state_->finished || !state_->impl || state_->impl->test();
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  std::lock_guard lock(state_->mutex);
  if (state_->finished) return;
  // Without an explicit timeout the deadline needs no clock read (see coarse_now()).
  const auto deadline =
      timeout ? std::chrono::steady_clock::now() + *timeout : state_->start + state_->timeout;
  if (state_->impl && !state_->impl->wait_until(deadline)) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - state_->start);
    throw TimeoutError(state_->op + " on rank " + std::to_string(state_->rank) + " did not complete within " +
                       std::to_string((timeout ? *timeout : state_->timeout).count()) + " ms (elapsed " +
                       std::to_string(elapsed.count()) + " ms since it was issued); a peer may have died or issued a "
                       "different collective");
  }
  state_->finished = true;
  state_->impl.reset();
  for (auto& fn : state_->continuations) fn();
  state_->continuations.clear();
  state_->keep_alive.clear();
}

Work& Work::then(std::function<void()> fn, std::shared_ptr<void> keep_alive) {
  std::lock_guard lock(state_->mutex);
  if (state_->finished) {
    fn();
  } else {
    state_->continuations.push_back(std::move(fn));
    if (keep_alive) state_->keep_alive.push_back(std::move(keep_alive));
  }
  return *this;
}

const std::string& Work::op() const { return state_->op; }

}  // namespace idist
