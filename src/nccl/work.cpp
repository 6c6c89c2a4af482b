#include "nccl/work.hpp"

#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/device_guard.hpp"
#include "nccl/stream_provider.hpp"

namespace idist::nccl_backend {

OpState::~OpState() {
  if (end) (void)cudaEventDestroy(end);  // fine while pending: released once it fires
}

bool OpState::event_done() const {
  const cudaError_t q = cudaEventQuery(end);
  if (q == cudaSuccess) return true;
  if (q == cudaErrorNotReady) return false;
  (void)cudaGetLastError();
  throw_cuda(q, name + " (waiting for its completion event)");
}

void OpState::complete() {
  std::lock_guard lock(mutex_);
  if (completed_) return;
  completed_ = true;
  for (auto& fn : on_complete) fn();
  on_complete.clear();
  keep_alive.clear();
}

bool NcclWork::test() {
  if (state_->event_done()) {
    state_->complete();
    return true;
  }
  return state_->comm->aborted();
}

bool NcclWork::wait_until(std::chrono::steady_clock::time_point deadline) {
  const Communicator& comm = *state_->comm;
  for (int round = 0;; ++round) {
    if (state_->event_done()) break;
    if (comm.aborted()) {
      if (auto f = comm.failure()) std::rethrow_exception(f);
      throw BackendError(fmt::format("nccl: {} on rank {}: the {} communicator was aborted", state_->name,
                                     comm.info().world_rank, comm.info().name));
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Spin briefly for small collectives, then sleep so that long waits cost no CPU.
    if (round < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1000 ? 20 : 200));
  }
  {
    // Device work the caller enqueues next on its stream runs after the collective.
    DeviceGuard guard(comm.info().device);
    auto caller = static_cast<cudaStream_t>(caller_stream(comm.info().device));
    check_cuda(cudaStreamWaitEvent(caller, state_->end, 0),
               "cudaStreamWaitEvent (caller's stream on " + state_->name + ")");
  }
  state_->complete();
  return true;
}

}  // namespace idist::nccl_backend
