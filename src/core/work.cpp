// Work handle: deadline-bounded waits, continuations and values.
#include "idist/work.hpp"

#include "core/work_impl.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist {

namespace core {

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

namespace {

// The operation of Work::after(): waits on the first Work.
class AfterImpl final : public WorkImpl {
 public:
  explicit AfterImpl(Work first) : first_(std::move(first)) {}
  bool test() override { return first_.is_completed(); }
  bool wait_until(std::chrono::steady_clock::time_point deadline) override {
    using namespace std::chrono;
    if (deadline == steady_clock::time_point::max()) {
      first_.wait();
      return true;
    }
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0 && !first_.is_completed()) return false;
    first_.wait(std::max(left, milliseconds(0)));  // its own TimeoutError names the operation
    return true;
  }

 private:
  Work first_;
};

}  // namespace

}  // namespace core

struct Work::State {
  std::shared_ptr<Impl> impl;
  std::optional<OpType> op;
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;  // serialises wait() so continuations run exactly once
  bool finished = false;
  std::vector<std::function<void(std::any&)>> continuations;
  std::vector<std::shared_ptr<void>> keep_alive;
  std::any value;
};

Work::Work(std::shared_ptr<Impl> impl, OpType op, int rank, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  state_->impl = std::move(impl);
  state_->op = op;
  state_->rank = rank;
  state_->timeout = timeout;
}

Work Work::after(Work first) {
  Work w;
  w.state_ = std::make_shared<State>();
  if (first.state_) {
    std::lock_guard lock(first.state_->mutex);
    w.state_->op = first.state_->op;
    w.state_->rank = first.state_->rank;
    w.state_->timeout = first.state_->timeout;
  }
  w.state_->impl = std::make_shared<core::AfterImpl>(std::move(first));
  return w;
}

bool Work::is_completed() {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  // After a wait() that only ordered a stream the operation is still asked: the GPU may not be past it.
  return !state_->impl || state_->impl->test();
}

// Blocks until the backend operation finished (the state's mutex held), bounded from now.
void Work::wait_on_host(std::optional<std::chrono::milliseconds> timeout) {
  // A completed operation is finished without reading the clock (a measurable share of a small
  // all-reduce on virtual machines): wait_until() then returns at once, rethrowing the operation's
  // error if it failed. Otherwise the wait is bounded from now on.
  if (state_->impl->test()) {
    state_->impl->wait_until(std::chrono::steady_clock::time_point::max());
  } else {
    const auto limit = timeout ? *timeout : state_->timeout;
    const auto start = std::chrono::steady_clock::now();
    if (!state_->impl->wait_until(start + limit)) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      throw TimeoutError(fmt::format(
          "{} on rank {} did not complete within {} ms (waited {} ms); a peer may have died or issued a different "
          "collective",
          op(), state_->rank, limit.count(), elapsed.count()));
    }
  }
  state_->impl.reset();
}

// Marks the Work finished and runs each continuation once, in order, even when one of them throws
// (the rest are dropped). The state's mutex is held.
void Work::run_continuations() {
  state_->finished = true;
  auto continuations = std::move(state_->continuations);
  state_->continuations.clear();
  for (auto& fn : continuations) fn(state_->value);
  state_->keep_alive.clear();
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (!state_) return;
  std::lock_guard lock(state_->mutex);
  if (state_->finished) {
    // Finished on a stream only: a timeout asks for the host to wait too.
    if (timeout && state_->impl) wait_on_host(timeout);
    return;
  }
  // The operation stays referenced after a stream-only wait, for synchronize().
  if (state_->impl && (timeout || state_->impl->test() || !state_->impl->wait_on_stream())) wait_on_host(timeout);
  run_continuations();
}

void Work::synchronize(std::optional<std::chrono::milliseconds> timeout) {
  if (!state_) return;
  std::lock_guard lock(state_->mutex);
  if (state_->impl) wait_on_host(timeout);
  if (!state_->finished) run_continuations();
}

Work& Work::add_continuation(std::function<void(std::any&)> fn, std::shared_ptr<void> keep_alive) {
  if (!state_) {
    // Complete without state: run now; keep a value only if one is produced.
    std::any value;
    fn(value);
    if (value.has_value()) set_value(std::move(value));
    return *this;
  }
  std::lock_guard lock(state_->mutex);
  if (state_->finished) {
    fn(state_->value);
  } else {
    state_->continuations.push_back(std::move(fn));
    if (keep_alive) state_->keep_alive.push_back(std::move(keep_alive));
  }
  return *this;
}

void Work::set_value(std::any value) {
  if (!state_) {
    state_ = std::make_shared<State>();
    state_->finished = true;
  }
  std::lock_guard lock(state_->mutex);
  state_->value = std::move(value);
}

bool Work::has_value() const {
  if (!state_) return false;
  std::lock_guard lock(state_->mutex);
  return state_->value.has_value();
}

const std::any* Work::value_slot() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->mutex);
  return state_->value.has_value() ? &state_->value : nullptr;
}

void Work::throw_no_value(const std::type_info& wanted) const {
  const std::any* v = value_slot();
  const std::string_view name = op();
  throw ValueError(fmt::format("the Work of {} {}; expected a value of type {}", name.empty() ? "an operation" : name,
                               v ? fmt::format("holds a value of type {}", v->type().name()) : "has no value",
                               wanted.name()));
}

std::string_view Work::op() const { return state_ && state_->op ? to_string(*state_->op) : std::string_view(); }

}  // namespace idist
