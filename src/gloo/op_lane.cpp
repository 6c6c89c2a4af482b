// OpLane: per-group ordered execution of blocking gloo operations (see op_lane.hpp).
#include "gloo/op_lane.hpp"

#include <pthread.h>

#include <utility>

#include "idist/error.hpp"

namespace idist::gloo_backend {

class OpLane::LaneWork final : public detail::AsyncWorkImpl {
 public:
  LaneWork(std::weak_ptr<State> lane, std::chrono::steady_clock::time_point inline_ok_from)
      : lane_(std::move(lane)), inline_ok_from_(inline_ok_from) {}
  bool wait_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  std::weak_ptr<State> lane_;
  std::chrono::steady_clock::time_point inline_ok_from_;
};

struct OpLane::State {
  struct Item {
    Op op;
    std::shared_ptr<LaneWork> work;
  };
  std::string name;
  std::mutex mutex;
  std::condition_variable cv;  // worker: queue became runnable, or stop
  std::deque<Item> queue;
  bool running = false;  // an operation is executing (on the worker or inline)
  bool stopping = false;
  bool worker_waiting = false;  // the worker sleeps on cv: only then does submit() pay for a notify

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
    item = Item{};  // release the operation's buffers before taking the lock again
    lock.lock();
    running = false;
    if (!queue.empty() && worker_waiting) cv.notify_one();
  }

  void worker_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      worker_waiting = true;
      cv.wait(lock, [&] { return stopping || (!running && !queue.empty()); });
      worker_waiting = false;
      if (stopping) return;  // stop() fails what is left in the queue
      run_head(lock);
    }
  }
};

bool OpLane::LaneWork::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (deadline >= inline_ok_from_) {
    if (auto lane = lane_.lock()) {
      std::unique_lock lock(lane->mutex);
      // Run inline only the head of an idle lane: that is exactly what the worker would run next.
      if (!lane->stopping && !lane->running && !lane->queue.empty() && lane->queue.front().work.get() == this)
        lane->run_head(lock);
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

std::shared_ptr<detail::WorkImpl> OpLane::submit(Op op, std::chrono::steady_clock::time_point inline_ok_from) {
  auto work = std::make_shared<LaneWork>(state_, inline_ok_from);
  std::lock_guard lock(state_->mutex);
  if (state_->stopping) {
    work->finish(std::make_exception_ptr(BackendError("the gloo backend was finalized; cannot run a collective on group " +
                                                      state_->name)));
    return work;
  }
  state_->queue.push_back(State::Item{std::move(op), work});
  if (state_->worker_waiting && !state_->running) state_->cv.notify_one();
  return work;
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
    item.work->finish(std::make_exception_ptr(BackendError(why + "; a collective on group " + state_->name +
                                                           " was cancelled before it started")));
  if (worker_.joinable()) worker_.join();
}

}  // namespace idist::gloo_backend
