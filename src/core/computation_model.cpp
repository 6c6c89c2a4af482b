// The ComputationModel front door (argument checks shared by every backend, then the backend's
// do_* function) and the defaults: group validation, "not supported" collectives.
#include "idist/computation_model.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/collective_checks.hpp"
#include "core/reduce_check.hpp"
#include "idist/error.hpp"

namespace idist {

Device ComputationModel::device() const { return Device{}; }

void ComputationModel::set_local_rank(int) {}

std::vector<int> ComputationModel::normalize_group(const Group& group) const {
  const int n = world_size();
  std::vector<int> ranks = group.ranks();
  if (group.is_world()) {
    ranks.resize(std::size_t(n));
    for (int r = 0; r < n; ++r) ranks[std::size_t(r)] = r;
    return ranks;
  }
  for (int r : ranks)
    if (r < 0 || r >= n)
      throw ValueError(fmt::format("group {}: rank {} is outside [0, {}) (world size {})", group.str(), r, n, n));
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw ValueError(fmt::format("group {}: ranks must be distinct", group.str()));
  return ranks;
}

void ComputationModel::unsupported(std::string_view what) const {
  throw BackendError(fmt::format("the {} backend does not support {}", backend().value_or("serial"), what));
}

void ComputationModel::check_device_buffer(std::string_view op, std::string_view arg, const Device& device) const {
  core::check_host_buffer(backend().value_or("serial"), op, arg, device);
}

// The front door: checks, then the backend.

void ComputationModel::check_all_reduce(const Buffer& data, ReduceOp op) const {
  check_buffer("all_reduce", "data", data.device);
  core::check_reduce_op(data.dtype, op);
}

void ComputationModel::check_all_gather(const ConstBuffer& in, const Buffer& out, const Group& group) const {
  check_buffer("all_gather", "in", in.device);
  check_buffer("all_gather", "out", out.device);
  core::check_all_gather_args(in, out, std::size_t(group_size(group)));
}

Work ComputationModel::all_reduce(Buffer data, ReduceOp op, const Group& group) {
  check_all_reduce(data, op);
  return do_all_reduce(data, op, group);
}

Work ComputationModel::all_gather(ConstBuffer in, Buffer out, const Group& group) {
  check_all_gather(in, out, group);
  return do_all_gather(in, out, group);
}

Work ComputationModel::all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                                    const Group& group) {
  check_buffer("all_gather", "in", in.device);
  check_buffer("all_gather", "out", out.device);
  const std::optional<int> me = group_rank(group);
  if (!me) core::throw_not_member("all_gather", rank(), group);
  core::check_all_gather_v_args(in, out, counts, std::size_t(group_size(group)), *me);
  return do_all_gather_v(in, out, counts, *me, group);
}

int ComputationModel::check_broadcast(const Buffer& data, int src, const Group& group) const {
  check_buffer("broadcast", "data", data.device);
  if (group.is_world()) [[likely]] {
    core::check_world_root(src, world_size());
    return src;
  }
  return core::root_in_group(src, normalize_group(group), group);
}

Work ComputationModel::broadcast(Buffer data, int src, const Group& group) {
  const int root = check_broadcast(data, src, group);
  return do_broadcast(data, src, root, group);
}

Work ComputationModel::barrier(const Group& group) { return do_barrier(group); }

void ComputationModel::all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  check_all_reduce(data, op);
  do_all_reduce_blocking(data, op, group);
}

void ComputationModel::all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  check_all_gather(in, out, group);
  do_all_gather_blocking(in, out, group);
}

void ComputationModel::broadcast_blocking(Buffer data, int src, const Group& group) {
  const int root = check_broadcast(data, src, group);
  do_broadcast_blocking(data, src, root, group);
}

void ComputationModel::barrier_blocking(const Group& group) { do_barrier_blocking(group); }

void ComputationModel::monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  if (normalize_group(group).size() > 1) do_monitored_barrier(group, timeout, wait_all_ranks);
}

// The backend's side: unsupported unless overridden; blocking forms wait on the non-blocking ones.

Work ComputationModel::do_all_reduce(Buffer, ReduceOp, const Group&) { unsupported("all_reduce"); }
Work ComputationModel::do_all_gather(ConstBuffer, Buffer, const Group&) { unsupported("all_gather"); }
Work ComputationModel::do_all_gather_v(ConstBuffer, Buffer, std::span<const std::size_t>, int, const Group&) {
  unsupported("all_gather with different lengths");
}
Work ComputationModel::do_broadcast(Buffer, int, int, const Group&) { unsupported("broadcast"); }
Work ComputationModel::do_barrier(const Group&) { unsupported("barrier"); }

void ComputationModel::do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  do_all_reduce(data, op, group).wait();
}
void ComputationModel::do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  do_all_gather(in, out, group).wait();
}
void ComputationModel::do_broadcast_blocking(Buffer data, int src, int root, const Group& group) {
  do_broadcast(data, src, root, group).wait();
}
void ComputationModel::do_barrier_blocking(const Group& group) { do_barrier(group).wait(); }
void ComputationModel::do_monitored_barrier(const Group&, std::chrono::milliseconds, bool) {
  unsupported("monitored_barrier");
}

}  // namespace idist
