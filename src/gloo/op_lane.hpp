#pragma once
// OpLane: runs the collectives of one process group one at a time, in issue order.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/work_impl.hpp"

namespace idist::gloo_backend {

/// Gloo's algorithms block the calling thread, and one gloo context must run one operation at a
/// time. An OpLane gives each process group a worker thread that runs its operations in the order
/// they were issued, so that collectives stay in the same order on every rank and a non-blocking
/// collective (e.g. a gradient bucket) overlaps the caller's computation.
///
/// Blocking calls stay cheap: a thread that waits for an operation (with the default timeout) runs
/// the lane's queue up to and including that operation itself, in order, instead of handing it to
/// the worker (no thread switch, no system call). The worker parks while nothing is queued; woken by
/// a submit, it leaves the fresh operation alone for a short grace period and starts it only when
/// nobody claimed it, so a non-blocking collective starts in the background after that grace period.
/// A blocking collective on an idle lane skips the queue altogether (run_if_idle()). See op_lane.cpp
/// for the cost model.
class OpLane {
 public:
  /// An operation: runs the gloo algorithm, throwing an idist::Error on failure.
  using Op = std::function<void()>;

  /// `name` ("world", "[0, 2]") appears in the worker thread's messages.
  explicit OpLane(std::string name);
  /// Stops the worker (see stop()).
  ~OpLane();
  OpLane(const OpLane&) = delete;
  OpLane& operator=(const OpLane&) = delete;

  /// Queues `op`. `inline_ok_from` is the earliest wait deadline for which the waiting thread may
  /// run `op` itself: a caller that waits with a shorter timeout of its own (polling) leaves the
  /// operation to the worker, so that giving up its wait does not abandon the operation.
  /// @returns the completion handle to wrap in a Work.
  std::shared_ptr<core::WorkImpl> submit(Op op, std::chrono::steady_clock::time_point inline_ok_from);

  /// Runs `op` on the calling thread at once when the lane is idle (nothing queued or running),
  /// without queueing it or waking the worker: the fast path of blocking collectives, which would
  /// otherwise keep the worker waking on its timer between back-to-back calls. Exceptions from
  /// `op` propagate. Returns false without running `op` when the lane is busy or stopped; the
  /// caller then submits it and waits, which keeps the issue order.
  template <class F>
  bool run_if_idle(F&& op) {
    if (!claim_idle()) return false;
    struct Release {
      OpLane* lane;
      ~Release() { lane->release_claim(); }
    } release{this};
    op();
    return true;
  }

  /// Finishes the queued operations that have not started with BackendError("<why>"), waits for the
  /// running one and joins the worker. Idempotent.
  void stop(const std::string& why);

 private:
  struct State;
  class LaneWork;
  bool claim_idle();     // marks the idle lane running; false when busy or stopped
  void release_claim();  // ends a claim_idle() run and hands queued work to the worker
  std::shared_ptr<State> state_;
  std::thread worker_;
};

}  // namespace idist::gloo_backend
