// OpLane: per-group ordered execution of blocking gloo operations (see op_lane.hpp).
//
// Cost model. A blocking collective is submit() + wait() back to back; the waiting thread runs the
// operation itself, so the fast path is a few lock / unlock pairs and no system call. The worker
// parks on its condition variable whenever nothing is queued, so an idle or compute-bound process
// has no timer wake-ups preempting its compute threads; a submit() that finds it parked wakes it
// (one futex call). A woken worker leaves a fresh operation alone for kGrace, because the caller is
// usually about to wait for it (and would otherwise block on the worker's result: two thread
// switches per operation); if the caller ran it meanwhile, the worker finds the queue empty and
// parks again. An operation nobody waits for is therefore started by the worker about kGrace after
// it was issued: non-blocking collectives progress in the background.
#include "gloo/op_lane.hpp"

#include <pthread.h>

#include <utility>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::gloo_backend {

namespace {
using Clock = std::chrono::steady_clock;
// How long a fresh operation is left for its caller to run inline.
constexpr auto kGrace = std::chrono::microseconds(200);
}  // namespace

class OpLane::LaneWork final : public core::AsyncWorkImpl {
 public:
  LaneWork(std::weak_ptr<State> lane, Clock::time_point inline_ok_from)
      : lane_(std::move(lane)), inline_ok_from_(inline_ok_from) {}
  bool wait_until(Clock::time_point deadline) override;

 private:
  friend struct OpLane::State;
  std::weak_ptr<State> lane_;
  Clock::time_point inline_ok_from_;
  bool done_in_lane_ = false;  // set under the lane's mutex once the operation has run
};

struct OpLane::State {
  struct Item {
    Op op;
    std::shared_ptr<LaneWork> work;
    Clock::time_point submitted;
  };
  enum class Worker { Busy, Waiting, Parked };  // Waiting: for the head's grace period to end

  std::string name;
  std::mutex mutex;
  std::condition_variable cv;  // wakes the worker
  std::deque<Item> queue;
  bool running = false;  // an operation is executing (on the worker or inline)
  bool stopping = false;
  Worker worker = Worker::Busy;

  // Wakes the worker when it is parked (one notify is enough: it is Busy until it parks again).
  // Called with `mutex` held; a waiting worker looks at the queue when the head's grace ends.
  void wake_if_parked() {
    if (worker != Worker::Parked) return;
    worker = Worker::Busy;
    cv.notify_one();
  }

  // Runs one item outside the lock and publishes its result.
  static void run(Item& item) {
    std::exception_ptr error;
    try {
      item.op();
    } catch (...) {
      error = std::current_exception();
    }
    item.work->finish(error);
  }

  // Takes the head of the queue and runs it; returns with `lock` held again.
  void run_head(std::unique_lock<std::mutex>& lock) {
    Item item = std::move(queue.front());
    queue.pop_front();
    running = true;
    lock.unlock();
    run(item);
    std::shared_ptr<LaneWork> work = std::move(item.work);
    item = Item{};  // release the operation's captures before taking the lock again
    lock.lock();
    work->done_in_lane_ = true;
    running = false;
    if (!queue.empty()) wake_if_parked();
  }

  void worker_loop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      const auto now = Clock::now();
      if (!running && !queue.empty()) {
        const auto ripe = queue.front().submitted + kGrace;
        if (now >= ripe) {
          worker = Worker::Busy;
          run_head(lock);
          continue;
        }
        worker = Worker::Waiting;
        cv.wait_until(lock, ripe);
        continue;
      }
      // Nothing to start: an empty queue, or an operation running inline (whose end wakes us when
      // more is queued).
      worker = Worker::Parked;
      cv.wait(lock);
    }
  }
};

bool OpLane::LaneWork::wait_until(Clock::time_point deadline) {
  // The waiting thread runs the queue up to and including this operation itself (in order, one
  // at a time), unless it waits with a shorter timeout than the operation's own: then the worker
  // runs it, so that giving up the wait does not abandon the operation.
  if (deadline >= inline_ok_from_) {
    if (auto lane = lane_.lock()) {
      std::unique_lock lock(lane->mutex);
      while (!done_in_lane_ && !lane->stopping && !lane->running && !lane->queue.empty()) lane->run_head(lock);
    }
  }
  return AsyncWorkImpl::wait_until(deadline);
}

OpLane::OpLane(std::string name) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  worker_ = std::thread([s = state_] { s->worker_loop(); });
  pthread_setname_np(worker_.native_handle(), "idist-gloo");
}

OpLane::~OpLane() { stop("the gloo backend was finalized"); }

std::shared_ptr<core::WorkImpl> OpLane::submit(Op op, Clock::time_point inline_ok_from) {
  auto work = std::make_shared<LaneWork>(state_, inline_ok_from);
  const auto now = Clock::now();
  std::lock_guard lock(state_->mutex);
  if (state_->stopping) {
    work->finish(std::make_exception_ptr(BackendError(
        fmt::format("the gloo backend was finalized; cannot run a collective on group {}", state_->name))));
    return work;
  }
  state_->queue.push_back(State::Item{std::move(op), work, now});
  state_->wake_if_parked();
  return work;
}

bool OpLane::claim_idle() {
  std::lock_guard lock(state_->mutex);
  if (state_->stopping || state_->running || !state_->queue.empty()) return false;
  state_->running = true;
  return true;
}

void OpLane::release_claim() {
  std::lock_guard lock(state_->mutex);
  state_->running = false;
  // Operations other threads queued meanwhile were left to the worker.
  if (!state_->queue.empty()) state_->wake_if_parked();
}

void OpLane::stop(const std::string& why) {
  std::deque<State::Item> left;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    left.swap(state_->queue);
  }
  state_->cv.notify_all();
  for (auto& item : left)
    item.work->finish(std::make_exception_ptr(
        BackendError(fmt::format("{}; a collective on group {} was cancelled before it started", why, state_->name))));
  if (worker_.joinable()) worker_.join();
}

}  // namespace idist::gloo_backend
