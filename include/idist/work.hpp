#pragma once
/// @file
/// idist::Work, the handle of a non-blocking operation and the future of what comes after it (the
/// counterpart of the Work that torch.distributed's async_op=True returns, which ignite.distributed
/// builds on, and of the torch.futures.Future a communication hook returns).

#include <any>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "idist/op_type.hpp"

namespace idist {

/// Handle of a non-blocking operation, and the future of the continuations added to it.
///
/// Results (the buffer's new contents) are valid only after wait() returns. A Work that is never
/// waited for does not block its destructor; the buffers it refers to must outlive the operation.
/// Copies share state: waiting on one copy completes all of them. A continuation added with then()
/// runs once, on the thread that waits, after the operation; a continuation that returns a value
/// gives the Work that value (value()), as torch.futures.Future.then does: a communication hook
/// returns `all_reduce_async(bucket).then([bucket] { return bucket; })`.
class Work {
 public:
  /// What a backend implements for one in-flight operation. Internal: defined in
  /// src/core/work_impl.hpp.
  class Impl;

  /// An already completed operation without a value (what every call returns on a rank outside the
  /// group, and the blocking forms). Allocates nothing.
  Work() = default;

  /// Wraps a backend operation. `op` and `rank` name it in error messages; `timeout` (milliseconds)
  /// bounds wait() when the caller gives no timeout of its own. A null `impl` is an operation that
  /// has completed; its continuations run at wait().
  Work(std::shared_ptr<Impl> impl, OpType op, int rank, std::chrono::milliseconds timeout);

  /// An already completed Work whose value() is `value` (torch.futures.Future with a result set).
  template <class T>
  static Work ready(T value) {
    Work w;
    w.set_value(std::any(std::move(value)));
    return w;
  }

  /// A new Work that completes when `first` does, with continuations and a value of its own: `first`
  /// and its continuations are unaffected, and waiting on either waits for the operation once. What a
  /// hook returns when the Work of its collective is also waited for elsewhere (PowerSGD's first
  /// all-reduce). Named and bounded like `first`.
  static Work after(Work first);

  /// True once the operation finished. Non-blocking; also drives progress for backends that need it
  /// (MPI). The continuations may not have run yet: call wait() before reading the results.
  bool is_completed();

  /// Waits for the operation, then runs the continuations added with then() (torch.distributed's
  /// `Work.wait(timeout)`).
  ///
  /// On the host backends (serial, mpi, gloo) and for nccl operations with host results, this blocks
  /// until the operation finished. For an nccl operation whose results stay on the GPU, wait() without
  /// a timeout makes the caller's current CUDA stream wait for it and returns without blocking the
  /// host, as ProcessGroupNCCL's `work.wait()` does: work the caller then queues on that stream sees
  /// the results, and a hung collective is reported by the watchdog (initialize()'s timeout) rather
  /// than here. With a timeout, or with IDIST_NCCL_BLOCKING_WAIT=1, it blocks the host as well. The
  /// host itself reads results after synchronize().
  /// @param timeout how long to wait from now; defaults to the timeout given at initialize().
  /// @throws TimeoutError naming the operation, rank and elapsed milliseconds when it does not finish
  ///         in time; BackendError when the backend reports a failure; what a continuation throws.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Blocks the host until the operation finished on its device, then runs the continuations if
  /// wait() has not: `torch.cuda.synchronize()` for this one operation (torch's own
  /// `Work.synchronize()` only orders the current stream, as wait() does here). Equal to wait() on
  /// the host backends; after a wait() that only ordered a stream, it blocks until the GPU is past
  /// the operation.
  /// @param timeout how long to wait from now; defaults to the timeout given at initialize().
  /// @throws what wait() throws.
  void synchronize(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Adds `fn` to run once, on the waiting thread, after the operation completed successfully (at
  /// once when it already did and was waited for), e.g. copying a staging buffer back or decompressing
  /// a bucket. When `fn` returns a value, that value becomes this Work's value(). `keep_alive` is held
  /// until then. Returns this Work.
  template <class Fn>
  requires std::is_invocable_v<Fn&> Work& then(Fn fn, std::shared_ptr<void> keep_alive = nullptr) {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>)
      return add_continuation([fn = std::move(fn)](std::any&) mutable { fn(); }, std::move(keep_alive));
    else
      return add_continuation([fn = std::move(fn)](std::any& value) mutable { value = fn(); }, std::move(keep_alive));
  }

  /// Whether the Work has a value (set by a continuation or ready()). Call after wait().
  bool has_value() const;

  /// wait(), then the value of type T.
  /// @throws ValueError naming the operation when the Work has no value or one of another type; what
  ///         wait() throws.
  template <class T>
  T value(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    wait(timeout);
    const std::any* v = value_slot();
    if (!v || v->type() != typeid(T)) throw_no_value(typeid(T));
    return std::any_cast<T>(*v);
  }

  /// Name of the operation ("all_reduce", "broadcast", ...); empty for a Work that names none.
  std::string_view op() const;

 private:
  struct State;
  void wait_on_host(std::optional<std::chrono::milliseconds> timeout);
  void run_continuations();
  Work& add_continuation(std::function<void(std::any&)> fn, std::shared_ptr<void> keep_alive);
  void set_value(std::any value);
  const std::any* value_slot() const;
  [[noreturn]] void throw_no_value(const std::type_info& wanted) const;

  std::shared_ptr<State> state_;
};

}  // namespace idist
