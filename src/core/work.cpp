// Work handle: deadline-bounded waits and continuations.
#include "idist/work.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>

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

struct Work::State {
  std::shared_ptr<detail::WorkImpl> impl;
  std::string op;
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;  // serialises wait() so continuations run exactly once
  bool finished = false;
  std::vector<std::function<void()>> continuations;
  std::vector<std::shared_ptr<void>> keep_alive;
};

// No state: finished, with nothing to run. Every call on a rank outside the group and every blocking
// form's internal handle is one, so it costs no allocation.
Work::Work() = default;

Work::Work(std::shared_ptr<detail::WorkImpl> impl, std::string_view op, int rank, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  state_->impl = std::move(impl);
  state_->op = op;
  state_->rank = rank;
  state_->timeout = timeout;
}

bool Work::is_completed() {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->finished || !state_->impl || state_->impl->test();
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (!state_) return;
  std::lock_guard lock(state_->mutex);
  if (state_->finished) return;
  // A completed operation is finished without reading the clock (~100 ns on virtual machines,
  // a measurable share of a small all-reduce): wait_until() then returns at once, rethrowing the
  // operation's error if it failed. Otherwise the wait is bounded from now on.
  if (state_->impl && state_->impl->test()) {
    state_->impl->wait_until(std::chrono::steady_clock::time_point::max());
  } else if (state_->impl) {
    const auto limit = timeout ? *timeout : state_->timeout;
    const auto start = std::chrono::steady_clock::now();
    if (!state_->impl->wait_until(start + limit)) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      throw TimeoutError(fmt::format(
          "{} on rank {} did not complete within {} ms (waited {} ms); a peer may have died or issued a different "
          "collective",
          state_->op, state_->rank, limit.count(), elapsed.count()));
    }
  }
  state_->finished = true;
  state_->impl.reset();
  for (auto& fn : state_->continuations) fn();
  state_->continuations.clear();
  state_->keep_alive.clear();
}

Work& Work::then(std::function<void()> fn, std::shared_ptr<void> keep_alive) {
  if (!state_) {
    fn();
    return *this;
  }
  std::lock_guard lock(state_->mutex);
  if (state_->finished) {
    fn();
  } else {
    state_->continuations.push_back(std::move(fn));
    if (keep_alive) state_->keep_alive.push_back(std::move(keep_alive));
  }
  return *this;
}

const std::string& Work::op() const {
  static const std::string none;
  return state_ ? state_->op : none;
}

}  // namespace idist
