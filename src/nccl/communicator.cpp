#include "nccl/communicator.hpp"

#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/device_guard.hpp"

namespace idist::nccl_backend {

namespace {

using Clock = Communicator::Clock;

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Short sleeps: initialization and enqueueing usually finish within microseconds to milliseconds.
void backoff(int& round) {
  if (round < 50)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(round < 200 ? 50 : 1000));
  ++round;
}

}  // namespace

Communicator::Communicator(ncclComm_t comm, int rank, int size, Info info)
    : comm_(comm), rank_(rank), size_(size), info_(std::move(info)) {
  DeviceGuard guard(info_.device);
  // Non-blocking: the communication stream must not synchronise implicitly with the legacy default
  // stream; ordering with the caller's stream is explicit, through events (docs/nccl.md).
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const cudaError_t err = cudaMalloc(&barrier_scratch_, sizeof(float));
  if (err != cudaSuccess) {
    (void)cudaStreamDestroy(stream_);
    throw_cuda(err, "cudaMalloc of the barrier operand");
  }
  (void)cudaMemset(barrier_scratch_, 0, sizeof(float));
  if (const cudaError_t e = cudaEventCreateWithFlags(&ready_event_, cudaEventDisableTiming); e != cudaSuccess) {
    (void)cudaFree(barrier_scratch_);
    (void)cudaStreamDestroy(stream_);
    throw_cuda(e, "cudaEventCreateWithFlags");
  }
}

Communicator::~Communicator() {
  DeviceGuard guard(info_.device);
  if (comm_) (void)ncclCommAbort(comm_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  if (barrier_scratch_) (void)cudaFree(barrier_scratch_);
  if (ready_event_) (void)cudaEventDestroy(ready_event_);
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
}

cudaEvent_t Communicator::take_event() {
  {
    std::lock_guard lock(event_mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return e;
}

void Communicator::give_event(cudaEvent_t event) noexcept {
  std::lock_guard lock(event_mutex_);
  try {
    free_events_.push_back(event);
  } catch (...) {
    (void)cudaEventDestroy(event);
  }
}

std::shared_ptr<Communicator> Communicator::init_rank(const UniqueIdBytes& id, int nranks, int rank, Info info,
                                                      std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  DeviceGuard guard(info.device);
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  ncclComm_t comm = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; lets us enforce the timeout and abort
  const ncclResult_t res = ncclCommInitRankConfig(&comm, nranks, uid, rank, &config);
#else
  const ncclResult_t res = ncclCommInitRank(&comm, nranks, uid, rank);  // blocking: cannot time out
#endif
  const std::string what = fmt::format("creating the {} communicator ({} ranks)", info.name, nranks);
  if (res != ncclSuccess && res != ncclInProgress) {
    const std::string text = nccl_error_text(res, comm);
    if (comm) (void)ncclCommAbort(comm);
    throw BackendError(fmt::format("nccl: {} on rank {} failed: {}", what, info.world_rank, text));
  }
  std::shared_ptr<Communicator> c;
  try {
    c.reset(new Communicator(comm, rank, nranks, std::move(info)));
  } catch (...) {
    (void)ncclCommAbort(comm);
    throw;
  }
  c->wait_ready(nullptr, what, start + timeout);
  return c;
}

std::shared_ptr<Communicator> Communicator::split(Communicator& parent, bool member, int key, Info info,
                                                  std::chrono::milliseconds timeout) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto lock = parent.lock_for_issue();
  DeviceGuard guard(info.device);
  ncclComm_t comm = nullptr;
  const std::string what = "splitting the " + info.name + " communicator from " + parent.info().name;
  // config nullptr: the new communicator inherits the parent's (non-blocking) configuration.
  const ncclResult_t res = ncclCommSplit(parent.handle(), member ? 0 : NCCL_SPLIT_NOCOLOR, key, &comm, nullptr);
  if (res != ncclSuccess && res != ncclInProgress)
    throw BackendError(
        fmt::format("nccl: {} on rank {} failed: {}", what, info.world_rank, nccl_error_text(res, parent.handle())));
  // The parent is busy until the split completes; non-members only wait for that.
  parent.settle(res, what, deadline);
  if (!member) return nullptr;
  if (!comm)
    throw BackendError(
        fmt::format("nccl: {} on rank {}: ncclCommSplit returned no communicator for a member", what, info.world_rank));
  int nranks = 0, rank = 0;
  std::shared_ptr<Communicator> c;
  try {
    c.reset(new Communicator(comm, 0, 0, std::move(info)));
  } catch (...) {
    (void)ncclCommAbort(comm);
    throw;
  }
  c->wait_ready(nullptr, what, deadline);
  if (ncclCommCount(comm, &nranks) != ncclSuccess || ncclCommUserRank(comm, &rank) != ncclSuccess)
    throw BackendError(fmt::format("nccl: {}: cannot read the new communicator's size and rank", what));
  c->rank_ = rank;
  c->size_ = nranks;
  return c;
#else
  (void)parent, (void)member, (void)key, (void)info, (void)timeout;
  throw BackendError("nccl: ncclCommSplit needs NCCL >= 2.18");
#endif
}

void Communicator::wait_ready(ncclComm_t other, std::string_view what, Clock::time_point deadline) {
  const auto start = Clock::now();
  for (int round = 0;; backoff(round)) {
    ncclResult_t state = ncclSuccess, other_state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) state = q;
    if (other && ncclCommGetAsyncError(other, &other_state) != ncclSuccess) other_state = ncclInternalError;
    if (state == ncclSuccess && other_state == ncclSuccess) return;
    if ((state != ncclSuccess && state != ncclInProgress) ||
        (other_state != ncclSuccess && other_state != ncclInProgress)) {
      const ncclResult_t bad = state != ncclSuccess && state != ncclInProgress ? state : other_state;
      auto err = std::make_exception_ptr(BackendError(
          fmt::format("nccl: {} on rank {} failed: {}", what, info_.world_rank, nccl_error_text(bad, comm_))));
      abort(err);
      std::rethrow_exception(err);
    }
    if (Clock::now() >= deadline) {
      auto err = std::make_exception_ptr(TimeoutError(
          fmt::format("nccl: {} on rank {} did not complete within the timeout (elapsed {} ms); a rank did not join or "
                      "cannot reach the others. The communicator was aborted.",
                      what, info_.world_rank, ms_since(start))));
      abort(err);
      std::rethrow_exception(err);
    }
  }
}

std::unique_lock<std::recursive_mutex> Communicator::lock_for_issue() {
  const auto throw_if_aborted = [this] {
    if (!aborted()) return;
    if (auto f = failure()) std::rethrow_exception(f);
    throw BackendError(fmt::format("nccl: the {} communicator was aborted", info_.name));
  };
  // Checked before the lock too: an abort in progress holds it inside ncclCommAbort, which can wait
  // for the device, and a later collective must fail at once rather than queue behind it.
  throw_if_aborted();
  std::unique_lock lock(issue_mutex_);
  throw_if_aborted();
  return lock;
}

void Communicator::settle(ncclResult_t res, std::string_view what, Clock::time_point deadline) {
  if (res == ncclSuccess) return;
  if (res != ncclInProgress)
    throw BackendError(fmt::format("nccl: {} on rank {} (communicator {}) failed: {}", what, info_.world_rank,
                                   info_.name, nccl_error_text(res, comm_)));
  const auto start = Clock::now();
  for (int round = 0;; backoff(round)) {
    if (aborted()) {
      if (auto f = failure()) std::rethrow_exception(f);
      throw BackendError(fmt::format("nccl: the {} communicator was aborted", info_.name));
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      auto err = std::make_exception_ptr(
          BackendError(fmt::format("nccl: {} on rank {} (communicator {}) failed: {}", what, info_.world_rank,
                                   info_.name, nccl_error_text(state, comm_))));
      abort(err);
      std::rethrow_exception(err);
    }
    if (Clock::now() >= deadline) {
      auto err = std::make_exception_ptr(TimeoutError(
          fmt::format("nccl: {} on rank {} (communicator {}) did not complete within the timeout (elapsed {} ms). The "
                      "communicator was aborted.",
                      what, info_.world_rank, info_.name, ms_since(start))));
      abort(err);
      std::rethrow_exception(err);
    }
  }
}

std::exception_ptr Communicator::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

ncclResult_t Communicator::async_error() const noexcept {
  // try_lock: never stall the watchdog behind an issuing thread; report "busy" as in progress.
  std::unique_lock lock(issue_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || aborted() || !comm_) return ncclInProgress;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
  return q != ncclSuccess ? q : state;
}

void Communicator::abort(std::exception_ptr reason) noexcept {
  request_abort(std::move(reason));
  finish_abort();
}

void Communicator::request_abort(std::exception_ptr reason) noexcept {
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) failure_ = std::move(reason);
  }
  abort_requested_.store(true, std::memory_order_release);
}

void Communicator::finish_abort() noexcept {
  if (!aborted()) return;
  // Issuers poll abort_requested_ while settling, so this lock is released promptly.
  std::lock_guard lock(issue_mutex_);
  if (!comm_) return;
  DeviceGuard guard(info_.device);
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Communicator::finalize(Clock::time_point deadline) noexcept {
  if (aborted()) return;
  try {
    auto lock = lock_for_issue();
    DeviceGuard guard(info_.device);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    // Flushes the operations already issued, then lets every rank release its resources.
    settle(ncclCommFinalize(comm_), "finalizing the " + info_.name + " communicator", deadline);
#endif
    (void)ncclCommDestroy(comm_);
    comm_ = nullptr;
  } catch (...) {
    abort(std::current_exception());
  }
}

}  // namespace idist::nccl_backend
