#pragma once
// One NCCL communicator (the world's or a group's) with its communication stream: creation bounded
// by the timeout, failure state, abort and collective teardown.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "nccl/unique_id.hpp"

namespace idist::nccl_backend {

/// NCCL_VERSION_CODE of the version that brought ncclCommSplit.
inline constexpr bool kHaveCommSplit = NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0);
/// Non-blocking communicators (ncclConfig_t.blocking = 0) can be aborted while they initialize.
inline constexpr bool kHaveNonBlocking = NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0);

/// A communicator and its stream. Thread-safe: collectives are enqueued under lock_for_issue(), the
/// watchdog may abort() from its own thread at any time.
class Communicator {
 public:
  using Clock = std::chrono::steady_clock;

  /// Identity of a communicator, for messages and the watchdog.
  struct Info {
    std::string name;    ///< "world" or the group's rank list
    int world_rank = 0;  ///< this process's world rank
    int device = 0;      ///< CUDA device index
  };

  /// Creates this rank's member of a communicator of `nranks` from `id` (ncclCommInitRankConfig,
  /// non-blocking where available) and waits until it is ready.
  /// @throws TimeoutError (after aborting it) when the peers do not all join within `timeout`;
  ///         BackendError when NCCL fails.
  static std::shared_ptr<Communicator> init_rank(const UniqueIdBytes& id, int nranks, int rank, Info info,
                                                 std::chrono::milliseconds timeout);

  /// ncclCommSplit of `parent` (collective over all of parent's ranks): members get the new
  /// communicator ordered by `key`, others nullptr.
  /// @throws as init_rank.
  static std::shared_ptr<Communicator> split(Communicator& parent, bool member, int key, Info info,
                                             std::chrono::milliseconds timeout);

  /// Aborts the communicator if finalize() did not run (never blocks on peers).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t handle() const noexcept { return comm_; }
  cudaStream_t stream() const noexcept { return stream_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const Info& info() const noexcept { return info_; }
  /// One float on the device, the operand of barrier().
  void* barrier_scratch() const noexcept { return barrier_scratch_; }
  /// Event recorded on the caller's stream before each collective; used under lock_for_issue() only
  /// (cudaStreamWaitEvent captures the record, so one event serves every collective).
  cudaEvent_t ready_event() const noexcept { return ready_event_; }
  /// An event (timing disabled) for one collective's end, from the communicator's pool: creating
  /// and destroying one per collective costs about as much as recording it. Give it back with
  /// give_event() when the collective is done with it.
  /// @throws BackendError when CUDA cannot create one.
  cudaEvent_t take_event();
  /// Returns an event from take_event() to the pool (re-recording a pending event is allowed).
  void give_event(cudaEvent_t event) noexcept;

  /// Held while enqueuing work. Throws the recorded failure when the communicator was aborted.
  std::unique_lock<std::recursive_mutex> lock_for_issue();

  /// Completes an NCCL call on a non-blocking communicator: while `res` is ncclInProgress, polls
  /// ncclCommGetAsyncError until the call is done. Caller holds lock_for_issue().
  /// @throws BackendError naming `what` on failure; TimeoutError (and aborts) past `deadline`.
  void settle(ncclResult_t res, std::string_view what, Clock::time_point deadline);

  /// The failure that aborted this communicator, or null.
  std::exception_ptr failure() const;
  /// True once abort() was requested.
  bool aborted() const noexcept { return abort_requested_.load(std::memory_order_acquire); }

  /// ncclCommGetAsyncError: ncclSuccess, ncclInProgress or the asynchronous error (e.g. a peer's
  /// network failure). Safe from any thread.
  ncclResult_t async_error() const noexcept;

  /// Records `reason` (the first one wins) and aborts the communicator with ncclCommAbort. Local,
  /// never waits for peers; waits only for an issuing thread to leave lock_for_issue(), which polls
  /// the abort flag, and for ncclCommAbort (which can wait for the device). Idempotent.
  void abort(std::exception_ptr reason) noexcept;
  /// Records `reason` and sets the abort flag at once, leaving ncclCommAbort to finish_abort() on
  /// another thread (the watchdog's): a caller past its deadline throws without waiting for the
  /// device. Every later collective fails at once with `reason`.
  void request_abort(std::exception_ptr reason) noexcept;
  /// Runs ncclCommAbort once an abort was requested and not yet carried out; otherwise nothing.
  void finish_abort() noexcept;

  /// Collective teardown: ncclCommFinalize, then ncclCommDestroy once quiescent; aborts past `deadline`.
  void finalize(Clock::time_point deadline) noexcept;

 private:
  Communicator(ncclComm_t comm, int rank, int size, Info info);
  // Polls until the pending non-blocking initialization of comm_ (and `other`, if given) is done.
  void wait_ready(ncclComm_t other, std::string_view what, Clock::time_point deadline);

  mutable std::recursive_mutex issue_mutex_;
  mutable std::mutex failure_mutex_;
  std::atomic<bool> abort_requested_{false};
  std::exception_ptr failure_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_scratch_ = nullptr;
  cudaEvent_t ready_event_ = nullptr;
  std::mutex event_mutex_;
  std::vector<cudaEvent_t> free_events_;
  int rank_ = 0;
  int size_ = 0;
  Info info_;
};

}  // namespace idist::nccl_backend
