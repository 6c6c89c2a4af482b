#pragma once
/// @file
/// idist::Work, the handle of a non-blocking collective (the counterpart of the Work object that
/// torch.distributed's async_op=True returns, which ignite.distributed builds on).

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace idist {

namespace detail {

/// What a backend implements for one in-flight operation. Thread-safe.
class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  /// Non-blocking: drives progress and returns true once the operation has finished (or failed).
  virtual bool test() = 0;
  /// Blocks until the operation has finished or `deadline` passed; returns false on timeout.
  /// @throws BackendError (or another idist::Error) when the operation failed.
  virtual bool wait_until(std::chrono::steady_clock::time_point deadline) = 0;
};

/// A WorkImpl completed by another thread (a backend's worker thread or watchdog) through
/// finish(). Backends whose algorithms block (Gloo) run them on a worker and hand out this.
class AsyncWorkImpl : public WorkImpl {
 public:
  /// Marks the operation finished; `error` is rethrown by wait_until() when set.
  void finish(std::exception_ptr error = nullptr);
  bool test() override;
  bool wait_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace detail

/// Handle of a non-blocking collective. A blocking collective is the async call plus wait().
///
/// Results (the buffer's new contents) are valid only after wait() returns. A Work that is never
/// waited for does not block its destructor; the buffers it refers to must outlive the operation.
/// Copies share state: waiting on one copy completes all of them.
class Work {
 public:
  /// An already completed operation (what every call returns on a rank outside the group).
  Work();

  /// Wraps a backend operation. `op` ("all_reduce", ...) and `rank` name it in error messages;
  /// `timeout` (milliseconds) bounds wait() when the caller gives no timeout of its own.
  Work(std::shared_ptr<detail::WorkImpl> impl, std::string_view op, int rank, std::chrono::milliseconds timeout);

  /// True once the operation finished. Non-blocking; also drives progress for backends that need it
  /// (MPI). Call wait() before reading the results.
  bool is_completed();

  /// Blocks until the operation finished, then runs the continuations added with then().
  /// @param timeout how long to wait from now; defaults to the timeout given at initialize().
  /// @throws TimeoutError naming the operation, rank and elapsed milliseconds when it does not finish
  ///         in time; BackendError when the backend reports a failure.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Adds `fn` to run (once, in the waiting thread) after the operation completes successfully,
  /// e.g. copying a staging buffer back. `keep_alive` is held until then.
  Work& then(std::function<void()> fn, std::shared_ptr<void> keep_alive = nullptr);

  /// Name of the operation ("all_reduce", "broadcast", ...).
  const std::string& op() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace idist
