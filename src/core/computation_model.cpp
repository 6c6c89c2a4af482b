// The ComputationModel front door: the argument checks every backend shares, the group resolution,
// then the backend's do_* function.
#include "idist/computation_model.hpp"

#include <string>

#include "core/backend.hpp"
#include "core/collective_checks.hpp"
#include "core/group_cache.hpp"
#include "core/reduce_check.hpp"

namespace idist {

struct ComputationModel::GroupTable {
  core::GroupCache<std::shared_ptr<ProcessGroup>> cache;
};

ComputationModel::ComputationModel(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)),
      layout_(backend_->layout()),
      timeout_(backend_->timeout()),
      id_(backend_->id()),
      buffer_device_(backend_->buffer_device()),
      world_(backend_->world_group()),
      groups_(std::make_unique<GroupTable>()) {}

ComputationModel::~ComputationModel() = default;

std::string ComputationModel::model_name() const { return backend_->model_name(); }
std::optional<std::string> ComputationModel::backend() const { return backend_->backend(); }
Device ComputationModel::device() const { return backend_->device(); }
bool ComputationModel::has_async_progress() const { return backend_->has_async_progress(); }
std::optional<std::string> ComputationModel::network_interface() const { return backend_->network_interface(); }
void ComputationModel::finalize() { backend_->finalize(); }

void ComputationModel::set_local_rank(int local_rank) {
  backend_->set_local_rank(local_rank);
  layout_.local_rank = backend_->local_rank();
}

void ComputationModel::check_device_buffer(OpType op, std::string_view arg, const Device& device) const {
  backend_->check_device_buffer(op, arg, device);
}

// ---------------------------------------------------------------------------------------------
// groups

const ProcessGroup& ComputationModel::process_group(const Group& group) {
  if (group.is_world()) [[likely]]
    return *world_;
  if (const auto& made = group.resolved(); made && made->owner() == id_) return *made;
  return resolve_list(group);
}

const ProcessGroup& ComputationModel::resolve_list(const Group& group) {
  if (const auto* found = groups_->cache.find(group.ranks())) return **found;
  const std::vector<int> sorted = core::validated_ranks(group, world_size());
  return *groups_->cache.get_or_create(group.ranks(), sorted,
                                       [&](const std::vector<int>& ranks) { return backend_->create_group(ranks); });
}

// ---------------------------------------------------------------------------------------------
// the front door: checks, the group, then the backend

Work ComputationModel::all_reduce(Buffer data, ReduceOp op, const Group& group, Completion how) {
  check_buffer(OpType::AllReduce, "data", data.device);
  core::check_reduce_op(data.dtype, op);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  return backend_->do_reduce(Reduction{OpType::AllReduce, data, data, op, -1, pg}, how);
}

Work ComputationModel::all_gather(ConstBuffer in, Buffer out, const Group& group, Completion how) {
  check_buffer(OpType::AllGather, "in", in.device);
  check_buffer(OpType::AllGather, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_gather_args(in, out, std::size_t(pg.size()));
  return backend_->do_gather(Gathering{OpType::AllGather, in, out, {}, -1, pg}, how);
}

Work ComputationModel::all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group& group,
                                    Completion how) {
  check_buffer(OpType::AllGatherV, "in", in.device);
  check_buffer(OpType::AllGatherV, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) return Work{};
  core::check_all_gather_v_args(in, out, counts, std::size_t(pg.size()), pg.rank());
  return backend_->do_gather(Gathering{OpType::AllGatherV, in, out, counts, -1, pg}, how);
}

Work ComputationModel::broadcast(Buffer data, int src, const Group& group, Completion how) {
  check_buffer(OpType::Broadcast, "data", data.device);
  core::check_world_root(OpType::Broadcast, src, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = pg.is_world() ? src : core::root_in_group(OpType::Broadcast, src, pg);
  return backend_->do_distribute(Distribution{OpType::Broadcast, data, data, {}, root, pg}, how);
}

Work ComputationModel::reduce(Buffer data, ReduceOp op, int dst, const Group& group, Completion how) {
  check_buffer(OpType::Reduce, "data", data.device);
  core::check_reduce_op(data.dtype, op, OpType::Reduce);
  core::check_world_rank(OpType::Reduce, "dst", dst, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = core::rank_in_group(OpType::Reduce, "dst", dst, pg);
  return backend_->do_reduce(Reduction{OpType::Reduce, data, data, op, root, pg}, how);
}

Work ComputationModel::gather(ConstBuffer in, Buffer out, int dst, const Group& group, Completion how) {
  check_buffer(OpType::Gather, "in", in.device);
  core::check_world_rank(OpType::Gather, "dst", dst, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = core::rank_in_group(OpType::Gather, "dst", dst, pg);
  if (root == pg.rank()) {
    check_buffer(OpType::Gather, "out", out.device);
    core::check_blocks(OpType::Gather, in, "in", ConstBuffer(out), "out", std::size_t(pg.size()));
  }
  return backend_->do_gather(Gathering{OpType::Gather, in, out, {}, root, pg}, how);
}

Work ComputationModel::scatter(ConstBuffer in, Buffer out, int src, const Group& group, Completion how) {
  check_buffer(OpType::Scatter, "out", out.device);
  core::check_world_rank(OpType::Scatter, "src", src, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = core::rank_in_group(OpType::Scatter, "src", src, pg);
  if (root == pg.rank()) {
    check_buffer(OpType::Scatter, "in", in.device);
    core::check_blocks(OpType::Scatter, ConstBuffer(out), "out", in, "in", std::size_t(pg.size()));
  }
  return backend_->do_distribute(Distribution{OpType::Scatter, in, out, {}, root, pg}, how);
}

Work ComputationModel::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, const Group& group, Completion how) {
  check_buffer(OpType::ReduceScatter, "in", in.device);
  check_buffer(OpType::ReduceScatter, "out", out.device);
  core::check_reduce_op(in.dtype, op, OpType::ReduceScatter);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_blocks(OpType::ReduceScatter, ConstBuffer(out), "out", in, "in", std::size_t(pg.size()));
  return backend_->do_reduce(Reduction{OpType::ReduceScatter, in, out, op, -1, pg}, how);
}

Work ComputationModel::reduce_scatter_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, ReduceOp op,
                                        const Group& group, Completion how) {
  check_buffer(OpType::ReduceScatterV, "in", in.device);
  check_buffer(OpType::ReduceScatterV, "out", out.device);
  core::check_reduce_op(in.dtype, op, OpType::ReduceScatterV);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_reduce_scatter_v_args(in, out, counts, std::size_t(pg.size()), pg.rank());
  return backend_->do_reduce(Reduction{OpType::ReduceScatterV, in, out, op, -1, pg, counts}, how);
}

Work ComputationModel::all_to_all(ConstBuffer in, Buffer out, const Group& group, Completion how) {
  check_buffer(OpType::AllToAll, "in", in.device);
  check_buffer(OpType::AllToAll, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_to_all_args(in, out, std::size_t(pg.size()));
  return backend_->do_distribute(Distribution{OpType::AllToAll, in, out, {}, -1, pg}, how);
}

Work ComputationModel::all_to_all_v(ConstBuffer in, Buffer out, std::span<const std::size_t> out_counts,
                                    std::span<const std::size_t> in_counts, const Group& group, Completion how) {
  check_buffer(OpType::AllToAllV, "in", in.device);
  check_buffer(OpType::AllToAllV, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_to_all_v_args(in, out, out_counts, in_counts, std::size_t(pg.size()));
  return backend_->do_distribute(Distribution{OpType::AllToAllV, in, out, out_counts, -1, pg, in_counts}, how);
}

Work ComputationModel::send(ConstBuffer data, int dst, int tag, Completion how) {
  check_buffer(OpType::Send, "data", data.device);
  core::check_peer(OpType::Send, "dst", dst, rank(), world_size(), tag);
  // Send only reads the buffer: the descriptor's one Buffer serves both directions.
  const Buffer buffer{const_cast<void*>(data.data), data.count, data.dtype, data.device};
  return backend_->do_point_to_point(PointToPoint{OpType::Send, buffer, dst, tag, *world_}, how);
}

Work ComputationModel::recv(Buffer data, int src, int tag, Completion how) {
  check_buffer(OpType::Recv, "data", data.device);
  core::check_peer(OpType::Recv, "src", src, rank(), world_size(), tag);
  return backend_->do_point_to_point(PointToPoint{OpType::Recv, data, src, tag, *world_}, how);
}

Work ComputationModel::barrier(const Group& group, Completion how) {
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  return backend_->do_barrier(pg, how);
}

void ComputationModel::monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  core::check_positive_timeout(OpType::MonitoredBarrier, timeout);
  const ProcessGroup& pg = process_group(group);
  if (pg.is_member() && pg.size() > 1) backend_->do_monitored_barrier(pg, timeout, wait_all_ranks);
}

}  // namespace idist
