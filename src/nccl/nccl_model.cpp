#include "nccl/nccl_model.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/backend_factories.hpp"
#include "core/collective_checks.hpp"
#include "core/host_reduce.hpp"
#include "idist/error.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/types.hpp"
#include "nccl/unique_id.hpp"
#include "nccl/validate.hpp"

namespace idist::nccl_backend {

namespace {

UniqueIdBytes generate_unique_id() {
  ncclUniqueId id;
  const ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess)
    throw BackendError(fmt::format("nccl: ncclGetUniqueId failed: {}", nccl_error_text(res, nullptr)));
  UniqueIdBytes bytes;
  std::memcpy(bytes.data(), &id, bytes.size());
  return bytes;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == "1";
}

std::string visible_devices_text() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? "CUDA_VISIBLE_DEVICES=\"" + std::string(v) + "\"" : std::string("CUDA_VISIBLE_DEVICES unset");
}

// The host fallback of all_reduce: gather every rank's row, reduce on the host in stream order, copy
// the result back into `d`.
void all_reduce_on_host(Op& op, void* d, std::size_t count, DType dtype, ReduceOp rop, int nranks) {
  const std::size_t bytes = count * dtype_size(dtype);
  void* rows = op.scratch(bytes * std::size_t(nranks));
  op.nccl(ncclAllGather(d, rows, bytes, ncclUint8, op.handle(), op.stream()));
  std::shared_ptr<void> host_rows = op.pinned(bytes * std::size_t(nranks));
  std::shared_ptr<void> host_out = op.pinned(bytes);
  op.copy(host_rows.get(), rows, bytes * std::size_t(nranks), cudaMemcpyDeviceToHost);
  op.host([host_rows, host_out, count, nranks, dtype, rop] {
    core::reduce_rows(host_out.get(), host_rows.get(), count, nranks, dtype, rop);
  });
  op.copy(d, host_out.get(), bytes, cudaMemcpyHostToDevice);
}

}  // namespace

NCCLModel::NCCLModel(const InitOptions& opts) : ComputationModel(opts.timeout) {
  const int ndev = require_cuda_device();  // before anything else: the clearest error without a GPU
  Rendezvous rv = rendezvous(opts);
  set_layout(rv.layout);
  store_ = std::move(rv.store);
  rendezvous_store_ = std::move(rv.rendezvous_store);
  env_guard_ = std::move(rv.env_guard);
  interface_ = std::move(rv.interface);

  if (local_rank() < ndev)
    device_ = local_rank();
  else if (ndev == 1)
    device_ = 0;  // each process was given its own GPU (e.g. SLURM --gpus-per-task=1)
  else
    throw BackendError(
        fmt::format("the nccl backend uses cuda:<local rank>, but local rank {} sees only {} CUDA devices "
                    "({}); start at most one process per GPU on each node",
                    local_rank(), ndev, visible_devices_text()));
  check_cuda(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_));
  int pools = 0;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_) != cudaSuccess || pools == 0)
    device_pool_ = BlockPool::create(BlockPool::Kind::Device, device_);
  if (env_flag("IDIST_NCCL_NO_SPLIT")) use_split_ = false;
  pinned_ = BlockPool::create(BlockPool::Kind::PinnedHost, device_);

  const UniqueIdBytes id = store_ ? exchange_unique_id(*store_, world_scope(), rank(), 0, generate_unique_id, timeout())
                                  : generate_unique_id();
  world_ = Communicator::init_rank(id, world_size(), rank(), Communicator::Info{"world", rank(), device_}, timeout());
  const auto interval = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(timeout() / 20),
                                   std::chrono::milliseconds(5), std::chrono::milliseconds(100));
  watchdog_ = std::make_unique<Watchdog>(device_, interval);
  watchdog_->watch(world_);
}

NCCLModel::~NCCLModel() { shutdown(false); }

void NCCLModel::finalize() { shutdown(true); }

void NCCLModel::shutdown(bool collective) noexcept {
  // Every communicator is finalized (collective) or aborted (local, never waits for peers) before any
  // memory is freed: cudaFree synchronizes the device, which a hung NCCL kernel would never allow.
  {
    const auto deadline = Communicator::Clock::now() + timeout();
    std::vector<std::shared_ptr<Communicator>> comms;
    groups_.for_each([&](const std::shared_ptr<Communicator>& comm) {
      if (comm && comm != world_) comms.push_back(comm);
    });
    if (world_) comms.push_back(world_);
    // Leaving on an error (no finalize, or an aborted communicator): peers may be dead or stuck, so rank 0's
    // store server must not wait for them to disconnect; a rank that raised exits promptly.
    const bool failed =
        !collective || std::any_of(comms.begin(), comms.end(), [](const auto& c) { return c->aborted(); });
    if (failed && store_) store_->leave_without_waiting();
    for (const auto& comm : comms) {
      if (collective)
        comm->finalize(deadline);
      else
        comm->abort(std::make_exception_ptr(BackendError(
            fmt::format("nccl: the {} communicator was torn down without idist::finalize()", comm->info().name))));
    }
  }
  watchdog_.reset();
  groups_.clear();
  world_.reset();
  pinned_.reset();
  device_pool_.reset();
  store_.reset();
  env_guard_.reset();
}

std::optional<int> NCCLModel::group_rank(const Group& group) {
  if (group.is_world()) return rank();
  const std::vector<int> ranks = normalize_group(group);
  const auto it = std::find(ranks.begin(), ranks.end(), rank());
  const bool member = it != ranks.end();
  groups_.get_or_create(group.ranks(), ranks, [&](const std::vector<int>& sorted) {
    std::shared_ptr<Communicator> comm = create_group_comm(sorted, member);
    if (comm && comm != world_) watchdog_->watch(comm);
    return comm;
  });
  if (!member) return std::nullopt;
  return int(it - ranks.begin());
}

std::shared_ptr<Communicator> NCCLModel::create_group_comm(const std::vector<int>& ranks, bool member) {
  if (int(ranks.size()) == world_size()) return world_;  // the world under another name
  Communicator::Info info{Group(ranks).str(), rank(), device_};
  if (use_split_) return Communicator::split(*world_, member, rank(), std::move(info), timeout());
  if (!member) return nullptr;
  const int position = int(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
  const UniqueIdBytes id =
      store_ ? exchange_unique_id(*store_, group_scope(ranks), rank(), ranks.front(), generate_unique_id, timeout())
             : generate_unique_id();
  return Communicator::init_rank(id, int(ranks.size()), position, std::move(info), timeout());
}

std::shared_ptr<Communicator> NCCLModel::comm_for(const Group& group, std::string_view op) {
  if (group.is_world()) return world_;
  if (!group_rank(group)) core::throw_not_member(op, rank(), group);
  return *groups_.find(group.ranks());  // made by group_rank()
}

Device NCCLModel::placement(std::string_view op, std::string_view arg, const void* data, std::size_t bytes,
                            const Device& dev) const {
  // check_buffer() (the front door) has accepted `dev`; here CUDA says what the pointer really is.
  if (dev.type != DeviceType::CUDA || bytes == 0) return dev;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, data) != cudaSuccess) {
    (void)cudaGetLastError();
    return Device{};  // not known to CUDA: ordinary host memory
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      if (attr.device != device_)
        throw ValueError(
            fmt::format("{}: {} is memory of cuda:{} but this rank's device is cuda:{}; the nccl backend "
                        "communicates memory of the rank's own device (idist::device())",
                        op, arg, attr.device, device_));
      return dev;
    case cudaMemoryTypeManaged: return dev;
    default: return Device{};  // pageable or page-locked host memory: staged through the device
  }
}

OpContext NCCLModel::op_context() const { return OpContext{pinned_, device_pool_, watchdog_.get(), timeout()}; }

void NCCLModel::check_device_buffer(std::string_view op, std::string_view arg, const Device& dev) const {
  check_buffer_device(op, arg, dev, device());
}

Work NCCLModel::all_reduce_op(Buffer data, ReduceOp op, const Group& group, Completion how) {
  const ReducePlan plan = plan_all_reduce(data.dtype, op);
  data.device = placement("all_reduce", "data", data.data, data.bytes(), data.device);
  std::shared_ptr<Communicator> comm = comm_for(group, "all_reduce");
  if (data.count == 0) return Work{};
  Op o("all_reduce", comm, op_context());
  void* d = o.inout(data);
  if (plan.kind == ReducePlan::Kind::Native)
    o.nccl(ncclAllReduce(d, d, data.count, plan.type, plan.op, o.handle(), o.stream()));
  else
    all_reduce_on_host(o, d, data.count, data.dtype, op, comm->size());
  return o.finish(how);
}

Work NCCLModel::all_gather_op(ConstBuffer in, Buffer out, const Group& group, Completion how) {
  in.device = placement("all_gather", "in", in.data, in.bytes(), in.device);
  out.device = placement("all_gather", "out", out.data, out.bytes(), out.device);
  std::shared_ptr<Communicator> comm = comm_for(group, "all_gather");
  if (in.count == 0) return Work{};
  Op o("all_gather", comm, op_context());
  const void* din = o.input(in);
  void* dout = o.output(out);
  // Data movement only: bytes serve every element type, int16 and bool included.
  o.nccl(ncclAllGather(din, dout, in.bytes(), ncclUint8, o.handle(), o.stream()));
  return o.finish(how);
}

Work NCCLModel::do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int me,
                                const Group& group) {
  in.device = placement("all_gather", "in", in.data, in.bytes(), in.device);
  out.device = placement("all_gather", "out", out.data, out.bytes(), out.device);
  std::shared_ptr<Communicator> comm = comm_for(group, "all_gather");
  if (out.count == 0) return Work{};
  Op o("all_gather", comm, op_context());
  const void* din = o.input(in);
  auto* dout = static_cast<char*>(o.output(out));
  const std::size_t esize = dtype_size(in.dtype);
  // One broadcast per contributing rank, fused into one NCCL launch by the group.
  o.nccl_queued(ncclGroupStart());
  try {
    std::size_t offset = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const std::size_t bytes = counts[r] * esize;
      if (bytes == 0) continue;
      const void* send = int(r) == me ? din : dout + offset;
      o.nccl_queued(ncclBroadcast(send, dout + offset, bytes, ncclUint8, int(r), o.handle(), o.stream()));
      offset += bytes;
    }
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  o.nccl(ncclGroupEnd());
  return o.finish();
}

Work NCCLModel::broadcast_op(Buffer data, int root, const Group& group, Completion how) {
  data.device = placement("broadcast", "data", data.data, data.bytes(), data.device);
  std::shared_ptr<Communicator> comm = comm_for(group, "broadcast");
  if (data.count == 0) return Work{};
  Op o("broadcast", comm, op_context());
  void* d = o.inout(data);
  o.nccl(ncclBroadcast(d, d, data.bytes(), ncclUint8, root, o.handle(), o.stream()));
  return o.finish(how);
}

Work NCCLModel::barrier_op(const Group& group, Completion how) {
  std::shared_ptr<Communicator> comm = comm_for(group, "barrier");
  // A one-element all-reduce on this rank's device: completes once every rank has contributed.
  Op o("barrier", comm, op_context());
  o.nccl(
      ncclAllReduce(comm->barrier_scratch(), comm->barrier_scratch(), 1, ncclFloat32, ncclSum, o.handle(), o.stream()));
  return o.finish(how);
}

// The public forms: a Work to wait on, or waited for inside the call.
Work NCCLModel::do_all_reduce(Buffer data, ReduceOp op, const Group& group) {
  return all_reduce_op(data, op, group, Completion::Async);
}
void NCCLModel::do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  all_reduce_op(data, op, group, Completion::Wait);
}
Work NCCLModel::do_all_gather(ConstBuffer in, Buffer out, const Group& group) {
  return all_gather_op(in, out, group, Completion::Async);
}
void NCCLModel::do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  all_gather_op(in, out, group, Completion::Wait);
}
Work NCCLModel::do_broadcast(Buffer data, int, int root, const Group& group) {
  return broadcast_op(data, root, group, Completion::Async);
}
void NCCLModel::do_broadcast_blocking(Buffer data, int, int root, const Group& group) {
  broadcast_op(data, root, group, Completion::Wait);
}
Work NCCLModel::do_barrier(const Group& group) { return barrier_op(group, Completion::Async); }
void NCCLModel::do_barrier_blocking(const Group& group) { barrier_op(group, Completion::Wait); }

std::unique_ptr<ComputationModel> create(const InitOptions& opts) { return std::make_unique<NCCLModel>(opts); }

}  // namespace idist::nccl_backend
