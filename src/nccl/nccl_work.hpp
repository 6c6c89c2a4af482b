#pragma once
// The state of one issued collective and the Work implementation handed to the caller.
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/work_impl.hpp"
#include "idist/op_type.hpp"
#include "nccl/communicator.hpp"

namespace idist::nccl_backend {

/// One collective enqueued on a communicator's stream. Shared by its Work and the watchdog, so that
/// its staging memory lives until the stream is past it even when the caller drops the Work.
/// Never destroyed in a CUDA callback (it calls CUDA in its destructor).
struct OpState {
  using Clock = std::chrono::steady_clock;

  OpType op = OpType::AllReduce;                   ///< the collective
  std::shared_ptr<Communicator> comm;              ///< keeps the communicator and its stream alive
  cudaEvent_t end = nullptr;                       ///< from comm's pool, recorded on its stream after the op
  Clock::time_point start;                         ///< when it was issued
  Clock::time_point deadline;                      ///< start + the initialize() timeout; the watchdog aborts past it
  std::vector<std::shared_ptr<void>> keep_alive;   ///< pinned blocks, device scratch
  std::vector<std::function<void()>> on_complete;  ///< copies from pinned blocks into host buffers

  OpState() = default;
  OpState(const OpState&) = delete;
  OpState& operator=(const OpState&) = delete;
  ~OpState();

  /// True once `end` has fired. @throws BackendError when CUDA reports an error instead.
  bool event_done() const;
  /// Waits until `end` fired (then orders the caller's stream after it and runs complete()) or
  /// `deadline` passed (returns false). Past the op's own deadline it expires the op and throws.
  /// @throws the communicator's failure once it was aborted; TimeoutError past `this->deadline`.
  bool wait_until(Clock::time_point deadline);
  /// Runs on_complete once (after event_done()) and releases the staging memory.
  void complete();
  /// Makes the caller's current stream wait for `end`. Returns false, leaving the host to wait, when
  /// there are host results to copy out or the communicator was aborted.
  bool order_caller_stream();
  /// Makes the caller's current stream (on the communicator's device) wait for `end`.
  void caller_stream_waits() const;
  /// The op ran past its deadline at `now`: requests the abort of its communicator with a
  /// TimeoutError naming the op, rank, communicator, limit and elapsed time (the first reason
  /// recorded wins). The watchdog carries out the abort.
  void expire(Clock::time_point now) const;

 private:
  std::mutex mutex_;
  bool completed_ = false;
};

/// Work of an nccl collective. wait_until() polls the end event (so that the timeout holds), then
/// makes the caller's current stream wait for it and copies host results out of their staging.
class NcclWork final : public core::WorkImpl {
 public:
  explicit NcclWork(std::shared_ptr<OpState> state) : state_(std::move(state)) {}
  /// True once the collective finished or its communicator was aborted.
  bool test() override;
  /// @throws the communicator's failure (TimeoutError / BackendError from the watchdog) when it was
  ///         aborted before the collective finished.
  bool wait_until(std::chrono::steady_clock::time_point deadline) override;
  /// Makes the caller's current stream wait for the collective, unless it has host results to copy
  /// out, its communicator was aborted, or IDIST_NCCL_BLOCKING_WAIT=1 asks for host waits.
  bool wait_on_stream() override;

 private:
  std::shared_ptr<OpState> state_;
};

}  // namespace idist::nccl_backend
