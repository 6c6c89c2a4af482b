// The nccl backend's poll: asynchronous communicator errors and collectives past their deadline.
#include "nccl/nccl_watchdog.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "nccl/cuda_error.hpp"

namespace idist::nccl_backend {

Watchdog::Watchdog(int device, std::chrono::milliseconds interval)
    : thread_(
          interval, [this](backend_kit::Watchdog::Clock::time_point) { poll_once(); },
          [device] { (void)cudaSetDevice(device); }) {}

void Watchdog::watch(const std::shared_ptr<Communicator>& comm) {
  std::lock_guard lock(mutex_);
  comms_.push_back(comm);
}

void Watchdog::track(std::shared_ptr<OpState> op) {
  std::lock_guard lock(mutex_);
  ops_.push_back(std::move(op));
}

std::size_t Watchdog::pending() const {
  std::lock_guard lock(mutex_);
  return ops_.size();
}

void Watchdog::poll_once() {
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<std::shared_ptr<OpState>> ops;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(comms_, [](const std::weak_ptr<Communicator>& w) { return w.expired(); });
    for (const auto& w : comms_)
      if (auto c = w.lock()) comms.push_back(std::move(c));
    ops = ops_;
  }

  for (const auto& c : comms) {
    if (c->aborted()) {
      c->finish_abort();  // requested by a waiter past its deadline; ncclCommAbort may wait for the device
      continue;
    }
    const ncclResult_t state = c->async_error();
    if (state == ncclSuccess || state == ncclInProgress) continue;
    c->abort(std::make_exception_ptr(BackendError(
        fmt::format("nccl: the {} communicator on rank {} reported an asynchronous error: {}; it was aborted (a peer "
                    "may have died or the network failed). Call idist::finalize().",
                    c->info().name, c->info().world_rank, nccl_error_text(state, nullptr)))));
  }

  const auto now = OpState::Clock::now();
  std::vector<OpState*> finished;
  for (const auto& op : ops) {
    bool done = false;
    try {
      done = op->event_done();
    } catch (const Error&) {
      op->comm->abort(std::current_exception());
      done = true;
    }
    if (done || op->comm->aborted()) {
      finished.push_back(op.get());
      continue;
    }
    if (now >= op->deadline) {
      op->expire(now);
      op->comm->finish_abort();
      finished.push_back(op.get());
    }
  }
  if (finished.empty()) return;
  std::vector<std::shared_ptr<OpState>> dropped;  // destroyed outside the lock (CUDA calls)
  {
    std::lock_guard lock(mutex_);
    auto it = std::stable_partition(ops_.begin(), ops_.end(), [&](const std::shared_ptr<OpState>& op) {
      return std::find(finished.begin(), finished.end(), op.get()) == finished.end();
    });
    dropped.assign(std::make_move_iterator(it), std::make_move_iterator(ops_.end()));
    ops_.erase(it, ops_.end());
  }
}

}  // namespace idist::nccl_backend
