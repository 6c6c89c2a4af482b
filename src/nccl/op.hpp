#pragma once
// Issuing one collective on a communicator: order after the caller's stream, stage host buffers
// through device memory, enqueue NCCL calls, record the end event, hand out the Work.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "idist/op_type.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"
#include "nccl/communicator.hpp"
#include "nccl/device_guard.hpp"
#include "nccl/nccl_staging.hpp"
#include "nccl/nccl_watchdog.hpp"
#include "nccl/nccl_work.hpp"

namespace idist::nccl_backend {

/// What an Op needs from its model.
struct OpContext {
  std::shared_ptr<BlockPool> pinned;       ///< page-locked host blocks
  std::shared_ptr<BlockPool> device_pool;  ///< device blocks; null: stream-ordered cudaMallocAsync
  Watchdog* watchdog = nullptr;
  std::chrono::milliseconds timeout{0};
};

/// Builder of one collective. Construct (takes the communicator's issue lock and orders the
/// communication stream after the caller's stream), map buffers to device pointers, call NCCL
/// through nccl(), then finish(). Destroyed without finish(): the enqueued work still completes and
/// its staging memory stays alive until then (tracked by the watchdog).
class Op {
 public:
  Op(OpType op, std::shared_ptr<Communicator> comm, const OpContext& ctx);
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  /// Device pointer holding `in`'s data: `in.data` itself for device memory, else a staging copy.
  const void* input(const ConstBuffer& in);
  /// Device pointer that receives `out`: `out.data` itself for device memory, else staging that is
  /// copied back into `out.data` when the Work completes.
  void* output(const Buffer& out);
  /// Both: an in-place operand (all_reduce, broadcast).
  void* inout(const Buffer& data);
  /// Device scratch of `bytes`, alive until the collective completed.
  void* scratch(std::size_t bytes);
  /// A page-locked host block of `bytes`, alive until the collective completed (and until `fn`s
  /// passed to host() that captured it have run).
  std::shared_ptr<void> pinned(std::size_t bytes);
  /// Enqueues `fn` on the communication stream (cudaLaunchHostFunc): it runs on a CUDA thread after
  /// the work enqueued before it, and the work enqueued after it waits for it. `fn` must not call CUDA.
  void host(std::function<void()> fn);
  /// Completes an NCCL call (settles non-blocking communicators).
  /// @throws BackendError / TimeoutError naming the op.
  void nccl(ncclResult_t res);
  /// Checks an NCCL call made between ncclGroupStart and ncclGroupEnd: it is only queued there, so
  /// nothing is settled (ncclGroupEnd is, through nccl()).
  /// @throws BackendError naming the op when NCCL reports an error.
  void nccl_queued(ncclResult_t res);
  /// Enqueues an asynchronous copy on the communication stream.
  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);

  cudaStream_t stream() const noexcept { return comm_->stream(); }
  ncclComm_t handle() const noexcept { return comm_->handle(); }
  const Communicator& comm() const noexcept { return *comm_; }

  /// Copies staged outputs back and records the end event. Async: registers with the watchdog and
  /// returns the Work (op name, world rank, timeout). Blocking: waits here until the collective
  /// completed (host results copied out, the caller's stream ordered after it) and returns a
  /// finished Work; the waiting thread enforces the deadline, so the op skips the watchdog's list
  /// unless the wait fails (then the watchdog keeps its staging memory alive until the stream is
  /// past it).
  /// @throws (Blocking) TimeoutError past the timeout (the communicator is aborted), or the
  ///         communicator's failure.
  Work finish(Completion how);

 private:
  // Copies staged outputs back, records the end event and releases the issue lock.
  void enqueue_end();

  std::shared_ptr<Communicator> comm_;
  DeviceGuard device_;  // NCCL and CUDA calls act on the communicator's device
  OpContext ctx_;
  std::shared_ptr<OpState> state_;
  std::unique_lock<std::recursive_mutex> lock_;
  // Device scratch freed in stream order at finish() (cudaFreeAsync after the last use).
  std::vector<std::shared_ptr<void>> stream_scratch_;
  // Host outputs: device staging -> pinned block, copied into user memory on completion.
  struct HostOut {
    void* user;
    const void* device;
    std::size_t bytes;
  };
  std::vector<HostOut> host_outputs_;
  bool finished_ = false;
};

}  // namespace idist::nccl_backend
