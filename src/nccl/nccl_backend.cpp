// NCCLBackend: setup, groups, buffer placement, the barrier and teardown.
#include "nccl/nccl_backend.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/backend_factories.hpp"
#include "idist/error.hpp"
#include "launch/launcher_env.hpp"
#include "launch/settings.hpp"
#include "nccl/cuda_error.hpp"
#include "nccl/nccl_types.hpp"
#include "nccl/unique_id.hpp"
#include "nccl/validate.hpp"
#include "store/store_progress_board.hpp"

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

std::string visible_devices_text() {
  const auto v = launch::cuda_visible_devices();
  return v ? "CUDA_VISIBLE_DEVICES=\"" + *v + "\"" : std::string("CUDA_VISIBLE_DEVICES unset");
}

}  // namespace

NCCLBackend::NCCLBackend(const InitOptions& opts) : Backend(opts.timeout) {
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
  if (launch::nccl_no_split()) use_split_ = false;
  pinned_ = BlockPool::create(BlockPool::Kind::PinnedHost, device_);

  const UniqueIdBytes uid = store_
                                ? exchange_unique_id(*store_, world_scope(), rank(), 0, generate_unique_id, timeout())
                                : generate_unique_id();
  world_comm_ =
      Communicator::init_rank(uid, world_size(), rank(), Communicator::Info{"world", rank(), device_}, timeout());
  const auto interval = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(timeout() / 20),
                                   std::chrono::milliseconds(5), std::chrono::milliseconds(100));
  watchdog_ = std::make_unique<Watchdog>(device_, interval);
  watchdog_->watch(world_comm_);
  std::vector<int> all(static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) all[std::size_t(r)] = r;
  auto world = std::make_shared<NcclGroup>(std::move(all), rank(), world_size(), id());
  world->comm = world_comm_;
  set_world_group(world);
  groups_.push_back(std::move(world));
}

NCCLBackend::~NCCLBackend() { shutdown(false); }

void NCCLBackend::finalize() { shutdown(true); }

void NCCLBackend::shutdown(bool collective) noexcept {
  // Every communicator is finalized (collective) or aborted (local, never waits for peers) before any
  // memory is freed: cudaFree synchronizes the device, which a hung NCCL kernel would never allow.
  {
    const auto deadline = Communicator::Clock::now() + timeout();
    std::vector<std::shared_ptr<Communicator>> comms;
    for (const auto& g : groups_)
      if (g->comm && g->comm != world_comm_) comms.push_back(g->comm);
    if (world_comm_) comms.push_back(world_comm_);
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
  for (auto& g : groups_) g->comm.reset();  // a Group the program still holds keeps an empty shell
  groups_.clear();
  world_comm_.reset();
  pinned_.reset();
  device_pool_.reset();
  store_.reset();
  env_guard_.reset();
}

std::shared_ptr<ProcessGroup> NCCLBackend::create_group(std::vector<int> sorted_ranks) {
  if (int(sorted_ranks.size()) == world_size()) return world_group();  // the world, listed
  auto group = std::make_shared<NcclGroup>(std::move(sorted_ranks), rank(), world_size(), id());
  group->comm = create_group_comm(group->ranks(), group->is_member());
  if (group->comm) watchdog_->watch(group->comm);
  groups_.push_back(group);
  return group;
}

std::shared_ptr<core::debug::ProgressBoard> NCCLBackend::progress_board() {
  return rendezvous_store_ ? store::make_progress_board(rendezvous_store_) : nullptr;
}

std::shared_ptr<Communicator> NCCLBackend::create_group_comm(const std::vector<int>& ranks, bool member) {
  Communicator::Info info{Group(ranks).str(), rank(), device_};
  if (use_split_) return Communicator::split(*world_comm_, member, rank(), std::move(info), timeout());
  if (!member) return nullptr;
  const int position = int(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
  const UniqueIdBytes id =
      store_ ? exchange_unique_id(*store_, group_scope(ranks), rank(), ranks.front(), generate_unique_id, timeout())
             : generate_unique_id();
  return Communicator::init_rank(id, int(ranks.size()), position, std::move(info), timeout());
}

Device NCCLBackend::placement(OpType op, std::string_view arg, const void* data, std::size_t bytes,
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
                        to_string(op), arg, attr.device, device_));
      return dev;
    case cudaMemoryTypeManaged: return dev;
    default: return Device{};  // pageable or page-locked host memory: staged through the device
  }
}

OpContext NCCLBackend::op_context() const { return OpContext{pinned_, device_pool_, watchdog_.get(), timeout()}; }

void NCCLBackend::check_device_buffer(OpType op, std::string_view arg, const Device& dev) const {
  check_buffer_device(to_string(op), arg, dev, device());
}

Work NCCLBackend::do_barrier(const ProcessGroup& group, Completion how) {
  const std::shared_ptr<Communicator>& comm = comm_of(group);
  // A one-element all-reduce on this rank's device: completes once every rank has contributed.
  Op o(OpType::Barrier, comm, op_context());
  o.nccl(
      ncclAllReduce(comm->barrier_scratch(), comm->barrier_scratch(), 1, ncclFloat32, ncclSum, o.handle(), o.stream()));
  return o.finish(how);
}

std::unique_ptr<core::Backend> create(const InitOptions& opts) { return std::make_unique<NCCLBackend>(opts); }

}  // namespace idist::nccl_backend
