#include "nccl/nccl_work.hpp"

#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/settings.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/device_guard.hpp"
#include "nccl/stream_provider.hpp"

namespace idist::nccl_backend {

OpState::~OpState() {
  if (end && comm) comm->give_event(end);
}

bool OpState::event_done() const {
  const cudaError_t q = cudaEventQuery(end);
  if (q == cudaSuccess) return true;
  if (q == cudaErrorNotReady) return false;
  (void)cudaGetLastError();
  throw_cuda(q, std::string(to_string(op)) + " (waiting for its completion event)");
}

void OpState::complete() {
  std::lock_guard lock(mutex_);
  if (completed_) return;
  completed_ = true;
  for (auto& fn : on_complete) fn();
  on_complete.clear();
  keep_alive.clear();
}

void OpState::expire(Clock::time_point now) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto elapsed = duration_cast<milliseconds>(now - start).count();
  const auto limit = duration_cast<milliseconds>(deadline - start).count();
  comm->request_abort(std::make_exception_ptr(TimeoutError(
      fmt::format("{} on rank {} (nccl, communicator {}) did not complete within {} ms (elapsed {} ms since it was "
                  "issued); the communicator was aborted. A peer may have died, hung, or issued a different "
                  "collective.",
                  to_string(op), comm->info().world_rank, comm->info().name, limit, elapsed))));
}

bool NcclWork::test() {
  if (state_->event_done()) {
    state_->complete();
    return true;
  }
  return state_->comm->aborted();
}

bool NcclWork::wait_until(std::chrono::steady_clock::time_point deadline) { return state_->wait_until(deadline); }

namespace {
// TORCH_NCCL_BLOCKING_WAIT's counterpart: every wait() blocks the host, read once per process.
bool blocking_wait() {
  static const bool on = launch::nccl_blocking_wait();
  return on;
}
}  // namespace

bool NcclWork::wait_on_stream() { return !blocking_wait() && state_->order_caller_stream(); }

void OpState::caller_stream_waits() const {
  DeviceGuard guard(comm->info().device);
  auto caller = static_cast<cudaStream_t>(caller_stream(comm->info().device));
  check_cuda(cudaStreamWaitEvent(caller, end, 0), "cudaStreamWaitEvent on the caller's stream", to_string(op));
}

bool OpState::order_caller_stream() {
  {
    std::lock_guard lock(mutex_);
    if (!on_complete.empty()) return false;  // complete() empties it
  }
  if (comm->aborted()) return false;  // the host wait rethrows the communicator's failure
  caller_stream_waits();
  return true;
}

bool OpState::wait_until(Clock::time_point wait_deadline) {
  for (int round = 0;; ++round) {
    if (event_done()) break;
    if (comm->aborted()) {
      if (auto f = comm->failure()) std::rethrow_exception(f);
      throw BackendError(fmt::format("nccl: {} on rank {}: the {} communicator was aborted", to_string(op),
                                     comm->info().world_rank, comm->info().name));
    }
    const auto now = Clock::now();
    if (now >= wait_deadline) {
      // Past the op's own deadline, the waiter does what the watchdog would at its next poll, so
      // that the caller gets the same error and later collectives fail at once. A shorter wait
      // (Work::wait(timeout)) only gives up waiting: the op may still finish.
      if (now < deadline) return false;
      expire(now);
      std::rethrow_exception(comm->failure());
    }
    // Spin briefly for small collectives, then sleep so that long waits cost no CPU.
    if (round < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1000 ? 20 : 200));
  }
  caller_stream_waits();  // device work the caller enqueues next on its stream runs after the collective
  complete();
  return true;
}

}  // namespace idist::nccl_backend
