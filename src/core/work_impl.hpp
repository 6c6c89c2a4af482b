#pragma once
// What a backend implements behind a Work: one in-flight operation that can be tested and waited for.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "idist/work.hpp"

namespace idist {

/// One in-flight operation. Thread-safe.
class Work::Impl {
 public:
  virtual ~Impl() = default;
  /// Non-blocking: drives progress and returns true once the operation has finished (or failed).
  virtual bool test() = 0;
  /// Blocks until the operation has finished or `deadline` passed; returns false on timeout.
  /// @throws BackendError (or another idist::Error) when the operation failed.
  virtual bool wait_until(std::chrono::steady_clock::time_point deadline) = 0;
  /// Orders the caller's current device stream after the operation without blocking the host, where
  /// the operation allows it (a GPU collective whose results stay on the device). Returns false when
  /// the host has to wait instead (host results, a failed operation, a backend without streams).
  virtual bool wait_on_stream() { return false; }
};

namespace core {

/// The operation behind a Work, under its internal name.
using WorkImpl = Work::Impl;

/// A WorkImpl completed by another thread (a backend's worker thread or watchdog) through finish().
/// Backends whose algorithms block (Gloo) run them on a worker and hand out this.
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

}  // namespace core

}  // namespace idist
