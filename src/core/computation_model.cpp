// The ComputationModel front door: the argument checks every backend shares, the group resolution,
// then the backend's do_* function; and the defaults: "not supported" operations.
#include "idist/computation_model.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include <fmt/format.h>

#include "core/collective_checks.hpp"
#include "core/group_cache.hpp"
#include "core/reduce_check.hpp"
#include "idist/error.hpp"

namespace idist {

namespace {

std::uint64_t next_model_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::vector<int> all_ranks(int n) {
  std::vector<int> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) ranks[std::size_t(r)] = r;
  return ranks;
}

}  // namespace

struct ComputationModel::GroupTable {
  core::GroupCache<std::shared_ptr<ProcessGroup>> cache;
};

ComputationModel::ComputationModel(std::chrono::milliseconds timeout)
    : timeout_(timeout), id_(next_model_id()), groups_(std::make_unique<GroupTable>()) {
  set_layout(layout_);
}

ComputationModel::~ComputationModel() = default;

Device ComputationModel::device() const { return Device{}; }

void ComputationModel::set_local_rank(int) {}

void ComputationModel::set_layout(const WorldLayout& layout) {
  layout_ = layout;
  world_ = std::make_shared<ProcessGroup>(all_ranks(layout.world_size), layout.rank, layout.world_size, id_);
}

void ComputationModel::unsupported(OpType op) const {
  throw BackendError(fmt::format("the {} backend does not support {}", backend().value_or("serial"), to_string(op)));
}

void ComputationModel::check_device_buffer(OpType op, std::string_view arg, const Device& device) const {
  core::check_host_buffer(backend().value_or("serial"), op, arg, device);
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
                                       [&](const std::vector<int>& ranks) { return create_group(ranks); });
}

std::shared_ptr<ProcessGroup> ComputationModel::create_group(std::vector<int> sorted_ranks) {
  if (int(sorted_ranks.size()) == world_size()) return world_;
  return std::make_shared<ProcessGroup>(std::move(sorted_ranks), rank(), world_size(), id_);
}

// ---------------------------------------------------------------------------------------------
// the front door: checks, the group, then the backend

Work ComputationModel::all_reduce(Buffer data, ReduceOp op, const Group& group, Completion how) {
  check_buffer(OpType::AllReduce, "data", data.device);
  core::check_reduce_op(data.dtype, op);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  return do_reduce(Reduction{OpType::AllReduce, data, data, op, -1, pg}, how);
}

Work ComputationModel::all_gather(ConstBuffer in, Buffer out, const Group& group, Completion how) {
  check_buffer(OpType::AllGather, "in", in.device);
  check_buffer(OpType::AllGather, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_gather_args(in, out, std::size_t(pg.size()));
  return do_gather(Gathering{OpType::AllGather, in, out, {}, -1, pg}, how);
}

Work ComputationModel::all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group& group,
                                    Completion how) {
  check_buffer(OpType::AllGatherV, "in", in.device);
  check_buffer(OpType::AllGatherV, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) return Work{};
  core::check_all_gather_v_args(in, out, counts, std::size_t(pg.size()), pg.rank());
  return do_gather(Gathering{OpType::AllGatherV, in, out, counts, -1, pg}, how);
}

Work ComputationModel::broadcast(Buffer data, int src, const Group& group, Completion how) {
  check_buffer(OpType::Broadcast, "data", data.device);
  core::check_world_root(OpType::Broadcast, src, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = pg.is_world() ? src : core::root_in_group(OpType::Broadcast, src, pg);
  return do_distribute(Distribution{OpType::Broadcast, data, data, {}, root, pg}, how);
}

Work ComputationModel::reduce(Buffer data, ReduceOp op, int dst, const Group& group, Completion how) {
  check_buffer(OpType::Reduce, "data", data.device);
  core::check_reduce_op(data.dtype, op, OpType::Reduce);
  core::check_world_rank(OpType::Reduce, "dst", dst, world_size());
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  const int root = core::rank_in_group(OpType::Reduce, "dst", dst, pg);
  return do_reduce(Reduction{OpType::Reduce, data, data, op, root, pg}, how);
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
  return do_gather(Gathering{OpType::Gather, in, out, {}, root, pg}, how);
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
  return do_distribute(Distribution{OpType::Scatter, in, out, {}, root, pg}, how);
}

Work ComputationModel::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, const Group& group, Completion how) {
  check_buffer(OpType::ReduceScatter, "in", in.device);
  check_buffer(OpType::ReduceScatter, "out", out.device);
  core::check_reduce_op(in.dtype, op, OpType::ReduceScatter);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_blocks(OpType::ReduceScatter, ConstBuffer(out), "out", in, "in", std::size_t(pg.size()));
  return do_reduce(Reduction{OpType::ReduceScatter, in, out, op, -1, pg}, how);
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
  return do_reduce(Reduction{OpType::ReduceScatterV, in, out, op, -1, pg, counts}, how);
}

Work ComputationModel::all_to_all(ConstBuffer in, Buffer out, const Group& group, Completion how) {
  check_buffer(OpType::AllToAll, "in", in.device);
  check_buffer(OpType::AllToAll, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_to_all_args(in, out, std::size_t(pg.size()));
  return do_distribute(Distribution{OpType::AllToAll, in, out, {}, -1, pg}, how);
}

Work ComputationModel::all_to_all_v(ConstBuffer in, Buffer out, std::span<const std::size_t> out_counts,
                                    std::span<const std::size_t> in_counts, const Group& group, Completion how) {
  check_buffer(OpType::AllToAllV, "in", in.device);
  check_buffer(OpType::AllToAllV, "out", out.device);
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  core::check_all_to_all_v_args(in, out, out_counts, in_counts, std::size_t(pg.size()));
  return do_distribute(Distribution{OpType::AllToAllV, in, out, out_counts, -1, pg, in_counts}, how);
}

Work ComputationModel::send(ConstBuffer data, int dst, int tag, Completion how) {
  check_buffer(OpType::Send, "data", data.device);
  core::check_peer(OpType::Send, "dst", dst, rank(), world_size(), tag);
  // Send only reads the buffer: the descriptor's one Buffer serves both directions.
  const Buffer buffer{const_cast<void*>(data.data), data.count, data.dtype, data.device};
  return do_point_to_point(PointToPoint{OpType::Send, buffer, dst, tag, *world_}, how);
}

Work ComputationModel::recv(Buffer data, int src, int tag, Completion how) {
  check_buffer(OpType::Recv, "data", data.device);
  core::check_peer(OpType::Recv, "src", src, rank(), world_size(), tag);
  return do_point_to_point(PointToPoint{OpType::Recv, data, src, tag, *world_}, how);
}

Work ComputationModel::barrier(const Group& group, Completion how) {
  const ProcessGroup& pg = process_group(group);
  if (!pg.is_member()) [[unlikely]]
    return Work{};
  return do_barrier(pg, how);
}

void ComputationModel::monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  core::check_positive_timeout(OpType::MonitoredBarrier, timeout);
  const ProcessGroup& pg = process_group(group);
  if (pg.is_member() && pg.size() > 1) do_monitored_barrier(pg, timeout, wait_all_ranks);
}

// ---------------------------------------------------------------------------------------------
// the backend's side: unsupported unless overridden

Work ComputationModel::do_reduce(const Reduction& r, Completion) { unsupported(r.op); }
Work ComputationModel::do_gather(const Gathering& g, Completion) { unsupported(g.op); }
Work ComputationModel::do_distribute(const Distribution& d, Completion) { unsupported(d.op); }
Work ComputationModel::do_point_to_point(const PointToPoint& p, Completion) { unsupported(p.op); }
Work ComputationModel::do_barrier(const ProcessGroup&, Completion) { unsupported(OpType::Barrier); }
void ComputationModel::do_monitored_barrier(const ProcessGroup&, std::chrono::milliseconds, bool) {
  unsupported(OpType::MonitoredBarrier);
}

}  // namespace idist
