#include "nccl/op.hpp"

#include <cstring>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/stream_provider.hpp"

namespace idist::nccl_backend {

namespace {

void run_host_function(void* data) {
  auto* fn = static_cast<std::function<void()>*>(data);
  try {
    (*fn)();
  } catch (...) {
    // Nothing can be reported from a CUDA callback; inputs were validated before enqueueing.
  }
  delete fn;
}

}  // namespace

Op::Op(OpType op, std::shared_ptr<Communicator> comm, const OpContext& ctx)
    : comm_(std::move(comm)), device_(comm_->info().device), ctx_(ctx), state_(std::make_shared<OpState>()) {
  state_->op = op;
  state_->comm = comm_;
  state_->start = OpState::Clock::now();
  state_->deadline = state_->start + ctx_.timeout;
  state_->keep_alive = take_held();
  lock_ = comm_->lock_for_issue();
  // The collective reads what the caller's stream produced: order it after that stream's work.
  auto caller = static_cast<cudaStream_t>(caller_stream(comm_->info().device));
  check_cuda(cudaEventRecord(comm_->ready_event(), caller), "cudaEventRecord on the caller's stream");
  check_cuda(cudaStreamWaitEvent(comm_->stream(), comm_->ready_event(), 0), "cudaStreamWaitEvent");
}

Op::~Op() {
  if (finished_) return;
  // An exception left the op half-issued. Whatever was enqueued still runs: keep its staging memory
  // alive until the stream is past it, under the watchdog's deadline like any other op.
  try {
    stream_scratch_.clear();
    if (!state_->end) state_->end = comm_->take_event();
    if (cudaEventRecord(state_->end, comm_->stream()) == cudaSuccess && ctx_.watchdog) ctx_.watchdog->track(state_);
  } catch (...) {
  }
}

const void* Op::input(const ConstBuffer& in) {
  if (in.device.type == DeviceType::CUDA || in.bytes() == 0) return in.data;
  std::shared_ptr<void> block = pinned(in.bytes());
  std::memcpy(block.get(), in.data, in.bytes());
  void* d = scratch(in.bytes());
  copy(d, block.get(), in.bytes(), cudaMemcpyHostToDevice);
  return d;
}

void* Op::output(const Buffer& out) {
  if (out.device.type == DeviceType::CUDA || out.bytes() == 0) return out.data;
  void* d = scratch(out.bytes());
  host_outputs_.push_back(HostOut{out.data, d, out.bytes()});
  return d;
}

void* Op::inout(const Buffer& data) {
  if (data.device.type == DeviceType::CUDA || data.bytes() == 0) return data.data;
  void* d = const_cast<void*>(input(ConstBuffer(data)));
  host_outputs_.push_back(HostOut{data.data, d, data.bytes()});
  return d;
}

void* Op::scratch(std::size_t bytes) {
  std::shared_ptr<void> s = device_scratch(bytes, comm_->stream(), comm_->info().device, ctx_.device_pool.get());
  void* p = s.get();
  // Stream-ordered scratch is released at finish() (its free is queued behind the op); pool blocks
  // only once the op has completed.
  (ctx_.device_pool ? state_->keep_alive : stream_scratch_).push_back(std::move(s));
  return p;
}

std::shared_ptr<void> Op::pinned(std::size_t bytes) {
  std::shared_ptr<void> block = ctx_.pinned->acquire(bytes);
  state_->keep_alive.push_back(block);
  return block;
}

void Op::host(std::function<void()> fn) {
  auto* heap = new std::function<void()>(std::move(fn));
  const cudaError_t err = cudaLaunchHostFunc(comm_->stream(), &run_host_function, heap);
  if (err != cudaSuccess) {
    delete heap;
    check_cuda(err, "cudaLaunchHostFunc", to_string(state_->op));
  }
}

void Op::nccl(ncclResult_t res) { comm_->settle(res, to_string(state_->op), state_->deadline); }

void Op::nccl_queued(ncclResult_t res) {
  if (res == ncclSuccess || res == ncclInProgress) return;
  throw BackendError(fmt::format("nccl: {} on rank {} (communicator {}) failed: {}", to_string(state_->op),
                                 comm_->info().world_rank, comm_->info().name, nccl_error_text(res, comm_->handle())));
}

void Op::copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, comm_->stream()), "cudaMemcpyAsync", to_string(state_->op));
}

void Op::enqueue_end() {
  for (const HostOut& h : host_outputs_) {
    std::shared_ptr<void> block = pinned(h.bytes);
    copy(block.get(), h.device, h.bytes, cudaMemcpyDeviceToHost);
    state_->on_complete.push_back(
        [user = h.user, from = block.get(), bytes = h.bytes] { std::memcpy(user, from, bytes); });
  }
  stream_scratch_.clear();  // cudaFreeAsync: after the work enqueued above
  state_->end = comm_->take_event();
  check_cuda(cudaEventRecord(state_->end, comm_->stream()), "cudaEventRecord", to_string(state_->op));
  finished_ = true;
  lock_.unlock();
}

Work Op::finish(Completion how) {
  enqueue_end();
  if (how == Completion::Blocking) {
    try {
      state_->wait_until(state_->deadline);  // past it: expires the op and throws
    } catch (...) {
      if (ctx_.watchdog) ctx_.watchdog->track(state_);
      throw;
    }
    return Work{};
  }
  if (ctx_.watchdog) ctx_.watchdog->track(state_);
  return Work(std::make_shared<NcclWork>(state_), state_->op, comm_->info().world_rank, ctx_.timeout);
}

}  // namespace idist::nccl_backend
